/* A record batch from KafkaRecords: the reference's encode_batch and encode_records
 * (adiskq/_sansio/kafka_codec.py, which has the format).
 *
 * kafka_encode_records(records, base_timestamp_ms) -> (section, last_offset_delta, max_timestamp_ms)
 *     the records section of a batch, uncompressed (a compressed batch's, before its codec runs).
 * kafka_encode_batch(base_offset, records, base_timestamp_ms, producer_id, producer_epoch,
 *                    base_sequence, partition_leader_epoch) -> bytes
 *     a whole uncompressed batch, CRC-32C included, in one allocation.
 * Both answer NotImplemented for anything but plain arguments in range (a record that is not a
 * 5-tuple, a key that is a bytearray, offset deltas that do not increase, a header key with a lone
 * surrogate, ...): the reference then raises its own error, or encodes the unusual input.
 *
 * Two passes over the records: the first checks every field and adds up the sizes, the second
 * writes into a bytes object of exactly that size. */
#include "kafka.h"

#define NOT_PLAIN 1

/* A key, value or header value: bytes (exact type) or None; its size with the length varint. */
static int field_size(PyObject *field, size_t *size) {
    if (field == Py_None) {
        *size += 1;
        return 0;
    }
    if (!PyBytes_CheckExact(field) || PyBytes_GET_SIZE(field) > INT32_MAX) return NOT_PLAIN;
    *size += kq_varint_size(PyBytes_GET_SIZE(field)) + (size_t)PyBytes_GET_SIZE(field);
    return 0;
}

static uint8_t *write_field(uint8_t *out, PyObject *field) {
    if (field == Py_None) return kq_write_varint(out, -1);
    Py_ssize_t length = PyBytes_GET_SIZE(field);
    out = kq_write_varint(out, length);
    memcpy(out, PyBytes_AS_STRING(field), (size_t)length);
    return out + length;
}

static int exact_int64(PyObject *object, int64_t low, int64_t high, int64_t *value) {
    if (!PyLong_CheckExact(object)) return NOT_PLAIN;
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(object, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (overflow || v < low || v > high) return NOT_PLAIN;
    *value = v;
    return 0;
}

/* The checked parts of one record: what the second pass writes. */
typedef struct {
    int64_t offset_delta;
    int64_t timestamp_delta;
    size_t body_size; /* bytes after the record's length varint */
} record_plan;

/* Check record `item` and size it: 0, NOT_PLAIN, or -1 for a Python error. */
static int plan_record(PyObject *item, int64_t base_timestamp_ms, int64_t *previous_delta, int64_t *max_timestamp_ms,
                       record_plan *plan) {
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != KQ_RECORD_FIELDS) return NOT_PLAIN;
    int64_t timestamp_ms;
    int status;
    if ((status = exact_int64(PyTuple_GET_ITEM(item, 0), 0, INT32_MAX, &plan->offset_delta)) != 0) return status;
    if (plan->offset_delta <= *previous_delta) return NOT_PLAIN;
    *previous_delta = plan->offset_delta;
    if ((status = exact_int64(PyTuple_GET_ITEM(item, 1), INT64_MIN, INT64_MAX, &timestamp_ms)) != 0) return status;
    if (__builtin_sub_overflow(timestamp_ms, base_timestamp_ms, &plan->timestamp_delta)) return NOT_PLAIN;
    if (timestamp_ms > *max_timestamp_ms) *max_timestamp_ms = timestamp_ms;
    PyObject *headers = PyTuple_GET_ITEM(item, 4);
    if (!PyList_Check(headers) && !PyTuple_Check(headers)) return NOT_PLAIN;
    Py_ssize_t header_count = PySequence_Fast_GET_SIZE(headers);
    size_t size = 1 + kq_varint_size(plan->timestamp_delta) + kq_varint_size(plan->offset_delta) +
                  kq_varint_size(header_count);
    if (field_size(PyTuple_GET_ITEM(item, 2), &size) || field_size(PyTuple_GET_ITEM(item, 3), &size))
        return NOT_PLAIN;
    PyObject **pairs = PySequence_Fast_ITEMS(headers);
    for (Py_ssize_t h = 0; h < header_count; h++) {
        PyObject *pair = pairs[h];
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 || !PyUnicode_CheckExact(PyTuple_GET_ITEM(pair, 0)))
            return NOT_PLAIN;
        Py_ssize_t name_len;
        if (PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(pair, 0), &name_len) == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return -1;
            PyErr_Clear(); /* a lone surrogate: the reference says so */
            return NOT_PLAIN;
        }
        size += kq_varint_size(name_len) + (size_t)name_len;
        if (field_size(PyTuple_GET_ITEM(pair, 1), &size)) return NOT_PLAIN;
    }
    if (size > INT32_MAX) return NOT_PLAIN;
    plan->body_size = size;
    return 0;
}

static uint8_t *write_record(uint8_t *out, PyObject *item, const record_plan *plan) {
    out = kq_write_varint(out, (int64_t)plan->body_size);
    *out++ = 0; /* attributes */
    out = kq_write_varint(out, plan->timestamp_delta);
    out = kq_write_varint(out, plan->offset_delta);
    out = write_field(out, PyTuple_GET_ITEM(item, 2));
    out = write_field(out, PyTuple_GET_ITEM(item, 3));
    PyObject *headers = PyTuple_GET_ITEM(item, 4);
    Py_ssize_t header_count = PySequence_Fast_GET_SIZE(headers);
    out = kq_write_varint(out, header_count);
    PyObject **pairs = PySequence_Fast_ITEMS(headers);
    for (Py_ssize_t h = 0; h < header_count; h++) {
        Py_ssize_t name_len;
        const char *name = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(pairs[h], 0), &name_len); /* cached: planned */
        out = kq_write_varint(out, name_len);
        memcpy(out, name, (size_t)name_len);
        out += name_len;
        out = write_field(out, PyTuple_GET_ITEM(pairs[h], 1));
    }
    return out;
}

typedef struct {
    record_plan *plans;
    size_t section_size;
    int64_t last_offset_delta;
    int64_t max_timestamp_ms;
} section_plan;

/* Plan every record of `records` (a list or tuple): 0, NOT_PLAIN or -1; plans freed unless 0. */
static int plan_section(PyObject *records, int64_t base_timestamp_ms, section_plan *section) {
    if (!PyList_Check(records) && !PyTuple_Check(records)) return NOT_PLAIN;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(records);
    section->plans = PyMem_Malloc((size_t)(count ? count : 1) * sizeof(record_plan));
    if (section->plans == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    section->section_size = 0;
    section->last_offset_delta = -1;
    section->max_timestamp_ms = INT64_MIN;
    PyObject **items = PySequence_Fast_ITEMS(records);
    for (Py_ssize_t i = 0; i < count; i++) {
        int status = plan_record(items[i], base_timestamp_ms, &section->last_offset_delta, &section->max_timestamp_ms,
                                 &section->plans[i]);
        if (status != 0) {
            PyMem_Free(section->plans);
            return status;
        }
        section->section_size += kq_varint_size((int64_t)section->plans[i].body_size) + section->plans[i].body_size;
        if (section->section_size > INT32_MAX) {
            PyMem_Free(section->plans);
            return NOT_PLAIN;
        }
    }
    return 0;
}

static void write_section(uint8_t *out, PyObject *records, const section_plan *section) {
    Py_ssize_t count = PySequence_Fast_GET_SIZE(records);
    PyObject **items = PySequence_Fast_ITEMS(records);
    for (Py_ssize_t i = 0; i < count; i++) out = write_record(out, items[i], &section->plans[i]);
}

/* kafka_encode_records(records, base_timestamp_ms) */
PyObject *adq_py_kafka_encode_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "kafka_encode_records(records, base_timestamp_ms) takes 2 arguments");
        return NULL;
    }
    int64_t base_timestamp_ms;
    int status = exact_int64(args[1], INT64_MIN, INT64_MAX, &base_timestamp_ms);
    section_plan section;
    if (status == 0) status = plan_section(args[0], base_timestamp_ms, &section);
    if (status < 0) return NULL;
    if (status == NOT_PLAIN) Py_RETURN_NOTIMPLEMENTED;
    PyObject *bytes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)section.section_size);
    if (bytes != NULL) write_section((uint8_t *)PyBytes_AS_STRING(bytes), args[0], &section);
    PyMem_Free(section.plans);
    if (bytes == NULL) return NULL;
    return Py_BuildValue("(NLL)", bytes, (long long)section.last_offset_delta, (long long)section.max_timestamp_ms);
}

/* kafka_encode_batch(base_offset, records, base_timestamp_ms, producer_id, producer_epoch, base_sequence,
 *                    partition_leader_epoch) */
PyObject *adq_py_kafka_encode_batch(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "kafka_encode_batch(base_offset, records, base_timestamp_ms, producer_id, producer_epoch, "
                        "base_sequence, partition_leader_epoch) takes 7 arguments");
        return NULL;
    }
    int64_t base_offset, base_timestamp_ms, producer_id, producer_epoch, base_sequence, leader_epoch;
    int status = exact_int64(args[0], INT64_MIN, INT64_MAX, &base_offset);
    if (status == 0) status = exact_int64(args[2], INT64_MIN, INT64_MAX, &base_timestamp_ms);
    if (status == 0) status = exact_int64(args[3], INT64_MIN, INT64_MAX, &producer_id);
    if (status == 0) status = exact_int64(args[4], INT16_MIN, INT16_MAX, &producer_epoch);
    if (status == 0) status = exact_int64(args[5], INT32_MIN, INT32_MAX, &base_sequence);
    if (status == 0) status = exact_int64(args[6], INT32_MIN, INT32_MAX, &leader_epoch);
    if (status == 0 && (!PyList_Check(args[1]) || PyList_GET_SIZE(args[1]) == 0) &&
        (!PyTuple_Check(args[1]) || PyTuple_GET_SIZE(args[1]) == 0))
        status = NOT_PLAIN; /* a batch holds at least one record */
    section_plan section;
    if (status == 0) status = plan_section(args[1], base_timestamp_ms, &section);
    if (status < 0) return NULL;
    if (status == NOT_PLAIN) Py_RETURN_NOTIMPLEMENTED;
    size_t total = KQ_HEADER_BYTES + section.section_size;
    PyObject *bytes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (bytes == NULL) {
        PyMem_Free(section.plans);
        return NULL;
    }
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(bytes);
    kq_store_be64(out, (uint64_t)base_offset);
    kq_store_be32(out + 8, (uint32_t)(total - KQ_LENGTH_PREFIX_BYTES));
    kq_store_be32(out + 12, (uint32_t)leader_epoch);
    out[KQ_MAGIC_AT] = KQ_MAGIC;
    uint8_t *after_crc = out + KQ_ATTRIBUTES_AT;
    kq_store_be16(after_crc, 0); /* attributes: no compression, CreateTime */
    kq_store_be32(after_crc + 2, (uint32_t)section.last_offset_delta);
    kq_store_be64(after_crc + 6, (uint64_t)base_timestamp_ms);
    kq_store_be64(after_crc + 14, (uint64_t)section.max_timestamp_ms);
    kq_store_be64(after_crc + 22, (uint64_t)producer_id);
    kq_store_be16(after_crc + 30, (uint16_t)producer_epoch);
    kq_store_be32(after_crc + 32, (uint32_t)base_sequence);
    kq_store_be32(after_crc + 36, (uint32_t)PySequence_Fast_GET_SIZE(args[1]));
    write_section(out + KQ_HEADER_BYTES, args[1], &section);
    PyMem_Free(section.plans);
    kq_store_be32(out + KQ_CRC_AT, adq_crc32c(0, after_crc, total - KQ_ATTRIBUTES_AT));
    return bytes;
}
