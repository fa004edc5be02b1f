/* One record's fields, read from a buffer and checked in the reference's order (codec.decode_record),
 * so that what is torn and what is bad is decided exactly as there. The one place the compiled core
 * reads a record; log/codec_encode.c writes them. */
#include "../core.h"

/* Strict UTF-8 as Python's decoder takes it: no overlong forms, no surrogates, nothing past U+10FFFF. */
int adq_is_utf8(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need;
        uint8_t low = 0x80, high = 0xBF; /* the range of the byte after the lead byte */
        if (c >= 0xC2 && c <= 0xDF) {
            need = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            if (c == 0xE0) low = 0xA0;
            if (c == 0xED) high = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            if (c == 0xF0) low = 0x90;
            if (c == 0xF4) high = 0x8F;
        } else {
            return 0;
        }
        if (n - i <= need) return 0;
        if (s[i + 1] < low || s[i + 1] > high) return 0;
        for (size_t k = 2; k <= need; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF) return 0;
        i += need + 1;
    }
    return 1;
}

adq_record_status adq_check_record(const uint8_t *buf, size_t limit, size_t pos, uint64_t max_record_bytes,
                                   adq_record *record) {
    if (pos > limit || limit - pos < 4) return ADQ_RECORD_TORN;
    size_t available = limit - pos;
    const uint8_t *at = buf + pos;
    uint64_t size = adq_load_u32(at + ADQ_SIZE_AT);
    if (size < ADQ_MIN_RECORD_BYTES || size > max_record_bytes) return ADQ_RECORD_BAD;
    if (available > ADQ_MAGIC_AT && at[ADQ_MAGIC_AT] != ADQ_MAGIC_V1) return ADQ_RECORD_BAD;
    if (available < size) return ADQ_RECORD_TORN;
    if (adq_crc32c(0, at + ADQ_MAGIC_AT, (size_t)size - ADQ_MAGIC_AT) != adq_load_u32(at + ADQ_CRC_AT))
        return ADQ_RECORD_BAD;
    uint64_t key_len = adq_load_u32(at + ADQ_KEY_LENGTH_AT);
    uint64_t key_end = ADQ_KEY_AT + key_len; /* relative to the record; 64-bit: no overflow */
    if (key_end + 2 > size) return ADQ_RECORD_BAD;
    uint8_t attributes = at[ADQ_MAGIC_AT + 1];
    uint64_t count_at = key_end; /* the header_count field */
    uint64_t tag_len = 0;
    if (attributes & ADQ_TAGGED) {
        tag_len = adq_load_u16(at + key_end);
        count_at = key_end + 2 + tag_len;
        if (count_at + 2 > size) return ADQ_RECORD_BAD;
        if (!adq_is_utf8(at + key_end + 2, (size_t)tag_len)) return ADQ_RECORD_BAD;
    }
    uint64_t transaction_at = 0;
    if (attributes & (ADQ_TRANSACTIONAL | ADQ_CONTROL | ADQ_RESERVED)) { /* codec._parse_transaction */
        if (attributes & ADQ_RESERVED || !(attributes & ADQ_TRANSACTIONAL)) return ADQ_RECORD_BAD;
        transaction_at = count_at;
        count_at += ADQ_PRODUCER_BYTES;
        if (count_at + 2 > size) return ADQ_RECORD_BAD;
        if (attributes & ADQ_CONTROL) {
            if (count_at + ADQ_MARKER_BYTES + 2 > size || at[count_at] > 1) return ADQ_RECORD_BAD;
            count_at += ADQ_MARKER_BYTES;
        }
    }
    uint16_t count = adq_load_u16(at + count_at);
    uint64_t p = count_at + 2;
    for (uint16_t h = 0; h < count; h++) {
        if (p + 2 > size) return ADQ_RECORD_BAD;
        uint64_t name_len = adq_load_u16(at + p);
        p += 2;
        if (p + name_len + 4 > size) return ADQ_RECORD_BAD;
        if (!adq_is_utf8(at + p, (size_t)name_len)) return ADQ_RECORD_BAD;
        p += name_len;
        uint64_t value_len = adq_load_u32(at + p);
        p += 4;
        if (value_len == ADQ_NULL_HEADER_LENGTH) continue; /* a null value: no bytes */
        if (p + value_len > size) return ADQ_RECORD_BAD;
        p += value_len;
    }
    record->size = (size_t)size;
    record->timestamp_ns = (int64_t)adq_load_u64(at + ADQ_TIMESTAMP_AT);
    record->attributes = attributes;
    record->key_at = pos + ADQ_KEY_AT;
    record->key_len = (size_t)key_len;
    record->has_tag = (attributes & ADQ_TAGGED) != 0;
    record->tag_at = record->has_tag ? pos + (size_t)key_end + 2 : 0;
    record->tag_len = (size_t)tag_len;
    record->headers_at = pos + (size_t)count_at + 2;
    record->header_count = count;
    record->value_at = pos + (size_t)p;
    record->transaction_at = transaction_at ? pos + (size_t)transaction_at : 0;
    return ADQ_RECORD_OK;
}
