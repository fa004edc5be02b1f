/* A Kafka request's payload read field by field: what kafka/fetch_request.c and
 * kafka/produce_request.c share (the reference: adiskq/kafka/wire/request_reader.py).
 *
 * Flexible versions write an array's, a string's or a record set's length as an unsigned varint of
 * length + 1 (0: null) and end each structure with its tagged fields (a varint count, 0 for none);
 * older ones a big-endian i32 (arrays, record sets) or i16 (strings) length, -1 for null. Each
 * function answers 0, or -1 for bytes the request's reader does not take ("not here": cut short or
 * malformed), which the reader answers as None so that the gateway reads the request with kio. */
#ifndef ADISKQ_KAFKA_REQUEST_READER_H
#define ADISKQ_KAFKA_REQUEST_READER_H

#include "codec.h"

typedef struct {
    const uint8_t *buf;
    size_t at, end;
    int flexible;
} kq_request_reader;

/* The next `count` bytes (at *chunk, when it is not NULL). */
static inline int kq_take(kq_request_reader *r, size_t count, const uint8_t **chunk) {
    if (count > r->end - r->at) return -1;
    if (chunk != NULL) *chunk = r->buf + r->at;
    r->at += count;
    return 0;
}

/* An unsigned varint of at most 5 bytes and 32 bits. */
static inline int kq_uvarint32(kq_request_reader *r, uint64_t *value) {
    uint64_t v = 0;
    for (int shift = 0; shift < 35; shift += 7) {
        const uint8_t *p;
        if (kq_take(r, 1, &p) < 0) return -1;
        v |= (uint64_t)(*p & 0x7F) << shift;
        if (!(*p & 0x80)) {
            if (v >> 32) return -1;
            *value = v;
            return 0;
        }
    }
    return -1;
}

/* A length: -1 for null; another negative one is not here. Not flexible: big-endian, of `width`
 * bytes (2 for a string, 4 for an array or a record set). */
static inline int kq_length_of(kq_request_reader *r, int width, int64_t *length) {
    if (r->flexible) {
        uint64_t raw;
        if (kq_uvarint32(r, &raw) < 0) return -1;
        *length = (int64_t)raw - 1;
        return 0;
    }
    const uint8_t *p;
    if (kq_take(r, (size_t)width, &p) < 0) return -1;
    *length = width == 2 ? (int16_t)kq_load_be16(p) : (int32_t)kq_load_be32(p);
    return *length < -1 ? -1 : 0;
}

/* An array's length: null, or more elements than bytes left (each takes one at least), is not
 * here, before anything is made for it. */
static inline int kq_count_of(kq_request_reader *r, int64_t *count) {
    if (kq_length_of(r, 4, count) < 0 || *count < 0 || (uint64_t)*count > r->end - r->at) return -1;
    return 0;
}

/* A string's bytes, not decoded; *length -1 (and *text NULL) for null. */
static inline int kq_string_bytes(kq_request_reader *r, const uint8_t **text, int64_t *length) {
    if (kq_length_of(r, 2, length) < 0) return -1;
    *text = NULL;
    return *length < 0 ? 0 : kq_take(r, (size_t)*length, text);
}

/* A structure's end: no tagged fields (a reader of them is kio's). */
static inline int kq_no_tags(kq_request_reader *r) {
    if (!r->flexible) return 0;
    uint64_t count;
    return kq_uvarint32(r, &count) < 0 || count != 0 ? -1 : 0;
}

/* A request reader's arguments (message, at, version), checked: the reader over the message from
 * `at`, flexible from `flexible_from` on, and the version; -1 with a Python error (TypeError or
 * ValueError, named by `function` and `name`) for arguments outside its contract. */
int kq_request_arguments(PyObject *const *args, Py_ssize_t nargs, const char *function, const char *name,
                         long min_version, long max_version, long flexible_from, kq_request_reader *reader,
                         long *version);

#endif
