/* adiskq's stored records straight to one Kafka record batch: what a Fetch answers with. The
 * reference is batch_from_stored_reference (adiskq/kafka/wire/stored_batch.py): the records
 * decoded to Messages (log/codec_decode.c's checks) and encoded as kafka_encode_messages encodes them
 * (kafka/codec_encode.c; wire/codec.py has the Kafka format, core.h adiskq's record layout).
 *
 * kafka_batch_from_stored(data, first_offset, count, max_record_bytes, dictionaries, nulls_header,
 *                         partition_leader_epoch) -> bytes | None
 *     `data` (bytes, or a contiguous buffer such as a view of a mapped segment) holds exactly `count`
 *     stored records, numbered from `first_offset`: one uncompressed batch (v2) of them, base offset
 *     `first_offset`, timestamps floored from nanoseconds to milliseconds, headers in their stored
 *     order, a null key or value where the `nulls_header` header (a str, or None) names it and that
 *     header left out, a compressed value decompressed with `dictionaries` (a dict of log/compression.c's
 *     prepared dictionaries by id, or None). None when a record is not whole and valid (log/codec_decode.c's
 *     checks), the records end before `data` does, a value will not decompress (or its dictionary is
 *     not in `dictionaries`), a record repeats a header name or has more than MAX_PLAIN_HEADERS
 *     headers, or the batch would pass 2**31 - 1 bytes: the caller then reads Messages, whose path
 *     raises the error that names the damage, or handles the unusual record.
 *
 * One pass over the records, each checked once (CRC included) and written at once into the batch's
 * bytes, which grow if the records do not fit the first guess and are cut to their size at the end:
 * no Message, key or value object is made (a compressed value's, alone, is decompressed into one). */
#include "codec.h"

#define MAX_PLAIN_HEADERS 64 /* the reference's MAX_PLAIN_HEADERS (wire/mapping.py) */
#define NS_PER_MS 1000000
#define NOT_PLAIN 1

/* The batch being written: a bytes object grown as needed, and how much of it is used. */
typedef struct {
    PyObject *bytes;
    size_t used;
    size_t capacity;
} batch_buffer;

/* Room for `more` bytes: 0, or -1 with MemoryError (the buffer then freed). */
static int reserve(batch_buffer *batch, size_t more) {
    if (more <= batch->capacity - batch->used) return 0;
    size_t wanted = batch->used + more, grown = batch->capacity + batch->capacity / 2;
    if (grown < wanted) grown = wanted;
    if (grown > PY_SSIZE_T_MAX) {
        Py_CLEAR(batch->bytes);
        PyErr_NoMemory();
        return -1;
    }
    if (_PyBytes_Resize(&batch->bytes, (Py_ssize_t)grown) < 0) return -1; /* frees it, sets the error */
    batch->capacity = grown;
    return 0;
}

/* One stored header: name and value positions in the buffer. */
typedef struct {
    const uint8_t *name;
    size_t name_length;
    const uint8_t *value;
    size_t value_length;
} stored_header;

/* A checked record's headers (escaped names as served): NOT_PLAIN for too many, a null value or a
 * repeated name, else 0; *nulls_at the index of the nulls header, or -1. */
static int read_headers(const uint8_t *buf, const adq_record *record, const char *nulls_name, size_t nulls_length,
                        stored_header *headers, int *nulls_at) {
    *nulls_at = -1;
    if (record->header_count > MAX_PLAIN_HEADERS) return NOT_PLAIN;
    const uint8_t *p = buf + record->headers_at;
    for (int h = 0; h < record->header_count; h++) {
        stored_header *header = &headers[h];
        header->name_length = adq_load_u16(p);
        header->name = p + 2;
        p += 2 + header->name_length;
        header->value_length = adq_load_u32(p);
        if (header->value_length == ADQ_NULL_HEADER_LENGTH) return NOT_PLAIN; /* Kafka's null: the reference */
        header->value = p + 4;
        p += 4 + header->value_length;
        for (int before = 0; before < h; before++) /* a repeated name: the Messages' dict merges them */
            if (headers[before].name_length == header->name_length &&
                memcmp(headers[before].name, header->name, header->name_length) == 0)
                return NOT_PLAIN;
        if (nulls_name != NULL && header->name_length == nulls_length &&
            memcmp(header->name, nulls_name, nulls_length) == 0)
            *nulls_at = h;
    }
    /* An escaped name (the nulls header and '~' marks, as wire.mapping.stored_header_name stores a
     * Kafka header named like it) is served with one mark fewer (wire.codec.served_header_name). */
    for (int h = 0; nulls_name != NULL && h < record->header_count; h++) {
        stored_header *header = &headers[h];
        if (header->name_length <= nulls_length || memcmp(header->name, nulls_name, nulls_length) != 0) continue;
        size_t mark = nulls_length;
        while (mark < header->name_length && header->name[mark] == '~') mark++;
        if (mark == header->name_length) header->name_length--;
    }
    return 0;
}

/* Whether the comma-separated `names` (the nulls header's value) holds `word` as one of its items. */
static int names_hold(const uint8_t *names, size_t length, const char *word) {
    size_t word_length = strlen(word), start = 0;
    for (size_t i = 0; i <= length; i++) {
        if (i == length || names[i] == ',') {
            if (i - start == word_length && memcmp(names + start, word, word_length) == 0) return 1;
            start = i + 1;
        }
    }
    return 0;
}

static size_t field_size(const uint8_t *field, size_t length) {
    return field == NULL ? 1 : kq_varint_size((int64_t)length) + length;
}

static uint8_t *write_field(uint8_t *out, const uint8_t *field, size_t length) {
    if (field == NULL) return kq_write_varint(out, -1);
    out = kq_write_varint(out, (int64_t)length);
    if (length) memcpy(out, field, length);
    return out + length;
}

/* The batch's fields its header carries, gathered while its records are written. */
typedef struct {
    int64_t base_timestamp_ms;
    int64_t max_timestamp_ms;
} batch_times;

/* Write the record at buf[*pos:limit] as the Kafka record `offset_delta` of the batch: 0 and *pos
 * past it, NOT_PLAIN, or -1 for a Python error (the batch then freed). */
static int write_record(batch_buffer *batch, const uint8_t *buf, size_t limit, size_t *pos, int64_t offset_delta,
                        unsigned long long max_record_bytes, PyObject *dictionaries, adq_zstd_last *last_dictionary,
                        const char *nulls_name, size_t nulls_length, batch_times *times) {
    adq_record record;
    if (adq_check_record(buf, limit, *pos, max_record_bytes, &record) != ADQ_RECORD_OK) return NOT_PLAIN;
    if (record.attributes & ADQ_TRANSACTIONAL) return NOT_PLAIN; /* a transaction's batch is not a plain one */
    stored_header headers[MAX_PLAIN_HEADERS];
    int nulls_at;
    if (read_headers(buf, &record, nulls_name, nulls_length, headers, &nulls_at) != 0) return NOT_PLAIN;
    const uint8_t *key = buf + record.key_at, *value = buf + record.value_at;
    size_t key_length = record.key_len, value_length = adq_value_length(&record);
    PyObject *decompressed = NULL;
    if (record.attributes & ADQ_COMPRESSED) { /* decompressed even when it goes out null, as Messages are */
        decompressed = adq_zstd_decompress(value, value_length, dictionaries, (size_t)max_record_bytes, last_dictionary);
        if (decompressed == NULL) {
            if (!PyErr_Occurred()) return NOT_PLAIN;
            Py_CLEAR(batch->bytes);
            return -1;
        }
        value = (const uint8_t *)PyBytes_AS_STRING(decompressed);
        value_length = (size_t)PyBytes_GET_SIZE(decompressed);
    }
    if (record.attributes & ADQ_KEYLESS) key = NULL; /* a push given no key: Kafka's null key (codec.py) */
    if (nulls_at >= 0) {
        const stored_header *nulls = &headers[nulls_at];
        if (names_hold(nulls->value, nulls->value_length, "key")) key = NULL;
        if (names_hold(nulls->value, nulls->value_length, "value")) value = NULL;
    }
    /* floored, as // is: a timestamp before 1970 goes to the millisecond before it */
    int64_t timestamp_ms = record.timestamp_ns / NS_PER_MS - (record.timestamp_ns % NS_PER_MS < 0);
    if (offset_delta == 0) times->base_timestamp_ms = times->max_timestamp_ms = timestamp_ms;
    if (timestamp_ms > times->max_timestamp_ms) times->max_timestamp_ms = timestamp_ms;
    int64_t timestamp_delta = timestamp_ms - times->base_timestamp_ms; /* both within 2**63 / 10**6 */
    int64_t header_count = record.header_count - (nulls_at >= 0);
    size_t body = 1 + kq_varint_size(timestamp_delta) + kq_varint_size(offset_delta) +
                  field_size(key, key_length) + field_size(value, value_length) + kq_varint_size(header_count);
    for (int h = 0; h < record.header_count; h++)
        if (h != nulls_at)
            body += kq_varint_size((int64_t)headers[h].name_length) + headers[h].name_length +
                    kq_varint_size((int64_t)headers[h].value_length) + headers[h].value_length;
    size_t whole = kq_varint_size((int64_t)body) + body;
    if (body > INT32_MAX || whole > (size_t)INT32_MAX - batch->used) {
        Py_XDECREF(decompressed);
        return NOT_PLAIN;
    }
    if (reserve(batch, whole) < 0) {
        Py_XDECREF(decompressed);
        return -1;
    }
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(batch->bytes) + batch->used;
    out = kq_write_varint(out, (int64_t)body);
    *out++ = 0; /* attributes */
    out = kq_write_varint(out, timestamp_delta);
    out = kq_write_varint(out, offset_delta);
    out = write_field(out, key, key_length);
    out = write_field(out, value, value_length);
    out = kq_write_varint(out, header_count);
    for (int h = 0; h < record.header_count; h++) {
        if (h == nulls_at) continue;
        out = write_field(out, headers[h].name, headers[h].name_length);
        out = write_field(out, headers[h].value, headers[h].value_length);
    }
    batch->used += whole;
    Py_XDECREF(decompressed);
    *pos += record.size;
    return 0;
}

/* The batch of the `count` records filling buf[:limit], or NULL: *plain 0 when it is not plain (no
 * exception set). */
static PyObject *stored_batch(const uint8_t *buf, size_t limit, int64_t first_offset, int64_t count,
                              unsigned long long max_record_bytes, PyObject *dictionaries, const char *nulls_name,
                              size_t nulls_length, int64_t leader_epoch, int *plain) {
    /* no more records than bytes can hold: a wrong count allocates nothing for records not there */
    if ((uint64_t)count > limit / ADQ_MIN_RECORD_BYTES) {
        *plain = 0;
        return NULL;
    }
    /* A Kafka record without headers is at most 12 bytes longer than the stored one (whose fixed
     * fields are 24 bytes, against at most 36 of varints): most batches fit the first guess. */
    batch_buffer batch = {NULL, KQ_HEADER_BYTES, KQ_HEADER_BYTES + limit + (size_t)count * 12};
    if (batch.capacity > (size_t)INT32_MAX) batch.capacity = (size_t)INT32_MAX;
    batch.bytes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)batch.capacity);
    if (batch.bytes == NULL) return NULL;
    batch_times times = {0, 0};
    adq_zstd_last last_dictionary = {0, NULL};
    size_t pos = 0;
    for (int64_t i = 0; i < count; i++) {
        int status = write_record(&batch, buf, limit, &pos, i, max_record_bytes, dictionaries, &last_dictionary,
                                  nulls_name, nulls_length, &times);
        if (status < 0) return NULL; /* the batch is freed */
        if (status == NOT_PLAIN) {
            Py_DECREF(batch.bytes);
            *plain = 0;
            return NULL;
        }
    }
    if (pos != limit) { /* the records end before the data does */
        Py_DECREF(batch.bytes);
        *plain = 0;
        return NULL;
    }
    if (batch.used != batch.capacity && _PyBytes_Resize(&batch.bytes, (Py_ssize_t)batch.used) < 0) return NULL;
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(batch.bytes);
    kq_store_be64(out, (uint64_t)first_offset);
    kq_store_be32(out + 8, (uint32_t)(batch.used - KQ_LENGTH_PREFIX_BYTES));
    kq_store_be32(out + 12, (uint32_t)leader_epoch);
    out[KQ_MAGIC_AT] = KQ_MAGIC;
    uint8_t *after_crc = out + KQ_ATTRIBUTES_AT;
    kq_store_be16(after_crc, 0); /* attributes: no compression, CreateTime */
    kq_store_be32(after_crc + 2, (uint32_t)(count - 1));
    kq_store_be64(after_crc + 6, (uint64_t)times.base_timestamp_ms);
    kq_store_be64(after_crc + 14, (uint64_t)times.max_timestamp_ms);
    kq_store_be64(after_crc + 22, UINT64_MAX);   /* producer id -1 */
    kq_store_be16(after_crc + 30, UINT16_MAX);   /* producer epoch -1 */
    kq_store_be32(after_crc + 32, UINT32_MAX);   /* base sequence -1 */
    kq_store_be32(after_crc + 36, (uint32_t)count);
    kq_store_be32(out + KQ_CRC_AT, adq_crc32c(0, after_crc, batch.used - KQ_ATTRIBUTES_AT));
    return batch.bytes;
}

/* An int argument within [low, high]: 0, or -1 with TypeError, OverflowError or ValueError. */
static int int_in(PyObject *object, const char *name, int64_t low, int64_t high, int64_t *value) {
    if (!PyLong_Check(object)) {
        PyErr_Format(PyExc_TypeError, "kafka_batch_from_stored: %s is an int", name);
        return -1;
    }
    long long v = PyLong_AsLongLong(object);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v < low || v > high) {
        PyErr_Format(PyExc_ValueError, "kafka_batch_from_stored: %s must be within [%lld, %lld]", name,
                     (long long)low, (long long)high);
        return -1;
    }
    *value = v;
    return 0;
}

/* kafka_batch_from_stored(data, first_offset, count, max_record_bytes, dictionaries, nulls_header,
 *                         partition_leader_epoch) */
PyObject *adq_py_kafka_batch_from_stored(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "kafka_batch_from_stored(data, first_offset, count, max_record_bytes, "
                                         "dictionaries, nulls_header, partition_leader_epoch) takes 7 arguments");
        return NULL;
    }
    int64_t first_offset, count, max_record_bytes, leader_epoch;
    if (int_in(args[1], "first_offset", 0, INT64_MAX, &first_offset) < 0 ||
        int_in(args[2], "count", 1, INT32_MAX, &count) < 0 ||
        int_in(args[3], "max_record_bytes", 0, INT64_MAX, &max_record_bytes) < 0 ||
        int_in(args[6], "partition_leader_epoch", INT32_MIN, INT32_MAX, &leader_epoch) < 0)
        return NULL;
    if (first_offset > INT64_MAX - (count - 1)) {
        PyErr_SetString(PyExc_ValueError, "kafka_batch_from_stored: the last offset is past 2**63 - 1");
        return NULL;
    }
    PyObject *dictionaries = args[4] == Py_None ? NULL : args[4];
    if (dictionaries != NULL && !PyDict_CheckExact(dictionaries)) {
        PyErr_SetString(PyExc_TypeError, "kafka_batch_from_stored: dictionaries is a dict or None");
        return NULL;
    }
    const char *nulls_name = NULL;
    Py_ssize_t nulls_length = 0;
    if (args[5] != Py_None) {
        if (!PyUnicode_CheckExact(args[5])) {
            PyErr_SetString(PyExc_TypeError, "kafka_batch_from_stored: nulls_header is a str or None");
            return NULL;
        }
        nulls_name = PyUnicode_AsUTF8AndSize(args[5], &nulls_length);
        if (nulls_name == NULL) return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    int plain = 1;
    PyObject *batch = stored_batch(view.buf, (size_t)view.len, first_offset, count, (unsigned long long)max_record_bytes,
                                   dictionaries, nulls_name, (size_t)nulls_length, leader_epoch, &plain);
    PyBuffer_Release(&view);
    if (batch == NULL && !plain && !PyErr_Occurred()) Py_RETURN_NONE;
    return batch;
}
