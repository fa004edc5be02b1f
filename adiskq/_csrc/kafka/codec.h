/* Kafka's record batch v2 in the compiled core: the varints and big-endian fields its two files share.
 *
 *   kafka/codec_decode.c  a Produce request's batches and a batch's records (uncompressed bytes)
 *   kafka/codec_encode.c  a batch (and a compressed batch's records section) from KafkaRecords, or from
 *                   stored Messages
 *   kafka/mapping.c   a batch's records section straight to adiskq's stored records (a Produce's write)
 *   kafka/stored_batch.c   adiskq's stored records straight to one batch (a Fetch's answer)
 *   kafka/fetch_answer.c  a whole Fetch response frame around those batches
 *   kafka/fetch_request.c  what a Fetch request asks for, read from its payload
 *   kafka/produce_request.c  what a Produce request carries, read from its payload
 *   kafka/request_reader.c   the request readers' arguments, checked (their field readers: kafka/request_reader.h)
 *
 * The format, every check and every error message are the pure-Python reference's
 * (adiskq/kafka/wire/codec.py). These functions never raise for bad Kafka bytes or unusual
 * arguments: they answer None (decoding) or NotImplemented (encoding) and the wrappers in
 * adiskq/kafka/wire/batch.py let the reference raise its own error, word for word. */
#ifndef ADQ_KAFKA_H
#define ADQ_KAFKA_H

#include "../core.h"

#define KQ_MAGIC 2
#define KQ_HEADER_BYTES 61
#define KQ_LENGTH_PREFIX_BYTES 12
#define KQ_MAGIC_AT 16
#define KQ_CRC_AT 17
#define KQ_ATTRIBUTES_AT 21
#define KQ_MIN_BATCH_LENGTH (KQ_HEADER_BYTES - KQ_LENGTH_PREFIX_BYTES)
#define KQ_COMPRESSION_MASK 0x07
#define KQ_TRANSACTIONAL 0x10
#define KQ_CONTROL 0x20
#define KQ_MIN_RECORD_BODY 6 /* attributes and five one-byte varints */
#define KQ_RECORD_FIELDS 5
#define KQ_BATCH_FIELDS 10

static inline uint16_t kq_load_be16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static inline uint32_t kq_load_be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline uint64_t kq_load_be64(const uint8_t *p) {
    return ((uint64_t)kq_load_be32(p) << 32) | kq_load_be32(p + 4);
}
static inline void kq_store_be16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}
static inline void kq_store_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}
static inline void kq_store_be64(uint8_t *p, uint64_t v) {
    kq_store_be32(p, (uint32_t)(v >> 32));
    kq_store_be32(p + 4, (uint32_t)v);
}

/* The zig-zag varint at buf[*pos:end] in at most max_bytes bytes (5: 32 bits, 10: 64 bits); 0 and
 * *pos moved past it, or -1 when it is cut off, too long or above 32 (64) bits. */
static inline int kq_read_varint(const uint8_t *buf, size_t *pos, size_t end, int max_bytes, int64_t *value) {
    size_t p = *pos;
    uint64_t raw = 0;
    for (int i = 0;; i++) {
        if (p >= end) return -1;
        uint64_t group = buf[p] & 0x7Fu;
        int more = buf[p] & 0x80u;
        p++;
        if (i == 9 && group > 1) return -1; /* the tenth group holds bit 63 only */
        raw |= group << (7 * i);
        if (!more) break;
        if (i + 1 >= max_bytes) return -1;
    }
    if (max_bytes == 5 && (raw >> 32)) return -1;
    *pos = p;
    *value = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
    return 0;
}

/* Bytes of the zig-zag varint of value, and writing it (returns the position after it). */
static inline size_t kq_varint_size(int64_t value) {
    uint64_t raw = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
    size_t size = 1;
    while (raw > 0x7F) {
        raw >>= 7;
        size++;
    }
    return size;
}
static inline uint8_t *kq_write_varint(uint8_t *out, int64_t value) {
    uint64_t raw = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
    while (raw > 0x7F) {
        *out++ = (uint8_t)((raw & 0x7F) | 0x80);
        raw >>= 7;
    }
    *out++ = (uint8_t)raw;
    return out;
}

/* A Python type that is a tuple type (KafkaRecord, KafkaBatch: NamedTuples), or -1 with TypeError. */
static inline int kq_check_tuple_type(PyObject *candidate, const char *name) {
    if (!PyType_Check(candidate) || !PyType_IsSubtype((PyTypeObject *)candidate, &PyTuple_Type)) {
        PyErr_Format(PyExc_TypeError, "%s is a tuple type (a NamedTuple)", name);
        return -1;
    }
    return 0;
}

/* kafka/mapping.c: the run of stored records of a plain records section (kafka_stored_records' result,
 * as a tuple of `type` unless NULL), or NULL: *plain 0 when the section is off the plain path (no
 * exception set), else a Python error. */
PyObject *kq_stored_section(const uint8_t *buf, size_t pos, size_t end, int64_t count, int64_t base_timestamp_ms,
                            int64_t now_ns, const char *nulls_name, size_t nulls_length, PyTypeObject *type,
                            int *plain);

PyObject *adq_py_kafka_decode_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *adq_py_kafka_decode_batches(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *adq_py_kafka_encode_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *adq_py_kafka_encode_batch(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *adq_py_kafka_encode_messages(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *adq_py_kafka_stored_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *adq_py_kafka_batch_from_stored(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *adq_py_kafka_fetch_answer(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *adq_py_kafka_fetch_request(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *adq_py_kafka_produce_request(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
