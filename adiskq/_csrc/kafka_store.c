/* A Kafka batch's records section as adiskq's stored records: the reference's stored_records
 * (adiskq/_sansio/kafka_mapping.py, which has the mapping rules; kafka_codec.py has the Kafka format,
 * core.h adiskq's record layout).
 *
 * kafka_stored_records(buf, pos, end, count, base_timestamp_ms, now_ns, nulls_header)
 *     -> (records, timestamps, key_hashes, largest, total) | None
 *     the `count` records filling buf[pos:end] (uncompressed, of a CreateTime batch), each as the
 *     bytes encode_record writes for its stored value, key, headers and timestamp, its timestamp in
 *     nanoseconds; `key_hashes` the CRC-32 of each stored key (the key index's hash) as the key
 *     index stores them, a u32 little-endian each (keyindex.pack_hashes: no int object a record,
 *     and the column is written as it is); `largest` the size of the largest record, `total` the
 *     size of them all (what the write takes: summed here, where each size is at hand, not by a
 *     Python loop over the records). None for anything off the plain path: bytes the Kafka decoder
 *     refuses, a record the mapping refuses (a null header value, a repeated header name, the
 *     reserved `nulls_header` as a name), one the encoder cannot store (a timestamp past 64 bits of
 *     nanoseconds, a header name over 65535 bytes), or one of more than MAX_PLAIN_HEADERS headers.
 *     The caller then takes the step by step path, whose errors say what is wrong.
 *
 * No KafkaRecord, key or value object is made: each record is parsed into positions in `buf`, then
 * written once into a bytes object of its exact size. */
#include "kafka.h"

#define MAX_PLAIN_HEADERS 64 /* the reference's MAX_PLAIN_HEADERS */
#define NS_PER_MS 1000000

typedef struct {
    size_t at; /* the first byte */
    size_t length;
} span;

/* One Kafka record, parsed and checked: positions in the buffer. */
typedef struct {
    int64_t timestamp_ms;
    span key, value;
    int key_null, value_null;
    Py_ssize_t header_count;
    span names[MAX_PLAIN_HEADERS], values[MAX_PLAIN_HEADERS];
} parsed_record;

/* A varint length and that many bytes: 0, 1 for null (length -1), -1 for bad bytes. */
static int read_span(const uint8_t *buf, size_t *pos, size_t end, span *field) {
    int64_t length;
    if (kq_read_varint(buf, pos, end, 5, &length) < 0 || length < -1) return -1;
    if (length == -1) return 1;
    if ((uint64_t)length > end - *pos) return -1;
    field->at = *pos;
    field->length = (size_t)length;
    *pos += (size_t)length;
    return 0;
}

/* The record at buf[*pos:end], checked as the Kafka decoder checks it and as the mapping takes it:
 * 0 and *pos past it, or -1 (off the plain path). */
static int parse_record(const uint8_t *buf, size_t *pos, size_t end, int64_t base_timestamp_ms,
                        const char *nulls_name, size_t nulls_length, parsed_record *record) {
    int64_t length, timestamp_delta, offset_delta, header_count;
    if (kq_read_varint(buf, pos, end, 5, &length) < 0 || length < KQ_MIN_RECORD_BODY ||
        (uint64_t)length > end - *pos)
        return -1;
    size_t record_end = *pos + (size_t)length;
    size_t p = *pos + 1; /* attributes: unused */
    if (kq_read_varint(buf, &p, record_end, 10, &timestamp_delta) < 0 ||
        __builtin_add_overflow(base_timestamp_ms, timestamp_delta, &record->timestamp_ms) ||
        kq_read_varint(buf, &p, record_end, 5, &offset_delta) < 0)
        return -1;
    int status;
    if ((status = read_span(buf, &p, record_end, &record->key)) < 0) return -1;
    record->key_null = status;
    if ((status = read_span(buf, &p, record_end, &record->value)) < 0) return -1;
    record->value_null = status;
    if (kq_read_varint(buf, &p, record_end, 5, &header_count) < 0 || header_count < 0 ||
        header_count > MAX_PLAIN_HEADERS)
        return -1;
    record->header_count = (Py_ssize_t)header_count;
    for (Py_ssize_t h = 0; h < record->header_count; h++) {
        span *name = &record->names[h];
        /* a null name is bad bytes, a null value refused by the mapping: both off the plain path */
        if (read_span(buf, &p, record_end, name) != 0 || !adq_is_utf8(buf + name->at, name->length) ||
            name->length > 0xFFFF || read_span(buf, &p, record_end, &record->values[h]) != 0)
            return -1;
        if (name->length == nulls_length && memcmp(buf + name->at, nulls_name, nulls_length) == 0) return -1;
        for (Py_ssize_t before = 0; before < h; before++) /* a repeated name */
            if (record->names[before].length == name->length &&
                memcmp(buf + record->names[before].at, buf + name->at, name->length) == 0)
                return -1;
    }
    if (p != record_end) return -1;
    *pos = record_end;
    return 0;
}

/* The stored record of a parsed one, as encode_record writes it, or NULL: *plain 0 when it cannot be
 * stored (off the plain path, no exception set). */
static PyObject *stored_record(const uint8_t *buf, const parsed_record *record, int64_t timestamp_ns,
                               const char *nulls_name, size_t nulls_length, int *plain) {
    const char *nulls_text = NULL;
    size_t nulls_text_length = 0;
    if (record->key_null || record->value_null) {
        nulls_text = record->key_null ? (record->value_null ? "key,value" : "key") : "value";
        nulls_text_length = strlen(nulls_text);
    }
    size_t key_length = record->key_null ? 0 : record->key.length;
    size_t value_length = record->value_null ? 0 : record->value.length;
    uint64_t size = ADQ_MIN_RECORD_BYTES + (uint64_t)key_length + value_length;
    for (Py_ssize_t h = 0; h < record->header_count; h++) size += 6 + record->names[h].length + record->values[h].length;
    if (nulls_text != NULL) size += 6 + nulls_length + nulls_text_length;
    if (size > 0xFFFFFFFFu) {
        *plain = 0;
        return NULL;
    }
    PyObject *bytes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (bytes == NULL) return NULL;
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(bytes);
    adq_store_u32(out + ADQ_SIZE_AT, (uint32_t)size);
    out[ADQ_MAGIC_AT] = ADQ_MAGIC_V1;
    out[ADQ_ATTRIBUTES_AT] = 0;
    adq_store_u64(out + ADQ_TIMESTAMP_AT, (uint64_t)timestamp_ns);
    adq_store_u32(out + ADQ_KEY_LENGTH_AT, (uint32_t)key_length);
    uint8_t *at = out + ADQ_KEY_AT;
    if (key_length) memcpy(at, buf + record->key.at, key_length);
    at += key_length;
    adq_store_u16(at, (uint16_t)(record->header_count + (nulls_text != NULL)));
    at += 2;
    for (Py_ssize_t h = 0; h < record->header_count; h++) {
        const span *name = &record->names[h], *value = &record->values[h];
        adq_store_u16(at, (uint16_t)name->length);
        memcpy(at + 2, buf + name->at, name->length);
        at += 2 + name->length;
        adq_store_u32(at, (uint32_t)value->length);
        memcpy(at + 4, buf + value->at, value->length);
        at += 4 + value->length;
    }
    if (nulls_text != NULL) {
        adq_store_u16(at, (uint16_t)nulls_length);
        memcpy(at + 2, nulls_name, nulls_length);
        at += 2 + nulls_length;
        adq_store_u32(at, (uint32_t)nulls_text_length);
        memcpy(at + 4, nulls_text, nulls_text_length);
        at += 4 + nulls_text_length;
    }
    if (value_length) memcpy(at, buf + record->value.at, value_length);
    adq_store_u32(out + ADQ_CRC_AT, adq_crc32c(0, out + ADQ_MAGIC_AT, (size_t)size - ADQ_MAGIC_AT));
    return bytes;
}

/* The five results of a plain section, or NULL: *plain 0 when it is not plain (no exception set). */
static PyObject *stored_section(const uint8_t *buf, size_t pos, size_t end, int64_t count, int64_t base_timestamp_ms,
                                int64_t now_ns, const char *nulls_name, size_t nulls_length, int *plain) {
    /* every record takes at least 7 bytes: a larger count cannot be right, and is not allocated for */
    if (count < 0 || (uint64_t)count > (end - pos) / (KQ_MIN_RECORD_BODY + 1)) {
        *plain = 0;
        return NULL;
    }
    PyObject *records = PyList_New((Py_ssize_t)count);
    PyObject *timestamps = PyList_New((Py_ssize_t)count);
    PyObject *hashes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)count * 4);
    PyObject *result = NULL, *timestamp = NULL;
    parsed_record *record = PyMem_Malloc(sizeof(parsed_record));
    if (records == NULL || timestamps == NULL || hashes == NULL || record == NULL) {
        if (record == NULL) PyErr_NoMemory();
        goto done;
    }
    int64_t last_ns = 0;
    size_t largest = 0, total = 0;
    for (Py_ssize_t i = 0; i < (Py_ssize_t)count; i++) {
        if (pos >= end ||
            parse_record(buf, &pos, end, base_timestamp_ms, nulls_name, nulls_length, record) < 0) {
            *plain = 0;
            goto done;
        }
        int64_t timestamp_ns = now_ns;
        if (record->timestamp_ms >= 0 && __builtin_mul_overflow(record->timestamp_ms, NS_PER_MS, &timestamp_ns)) {
            *plain = 0; /* past 64 bits of nanoseconds: the encoder refuses it */
            goto done;
        }
        PyObject *stored = stored_record(buf, record, timestamp_ns, nulls_name, nulls_length, plain);
        if (stored == NULL) goto done;
        PyList_SET_ITEM(records, i, stored);
        size_t stored_size = (size_t)PyBytes_GET_SIZE(stored);
        if (stored_size > largest) largest = stored_size;
        total += stored_size; /* a few times the bytes of buf at most: no overflow */
        /* records of one millisecond (most of a batch a client lingered over) share one int */
        if (timestamp == NULL || timestamp_ns != last_ns) {
            PyObject *object = PyLong_FromLongLong(timestamp_ns);
            if (object == NULL) goto done;
            Py_XSETREF(timestamp, object);
            last_ns = timestamp_ns;
        }
        PyList_SET_ITEM(timestamps, i, Py_NewRef(timestamp));
        const uint8_t *key = record->key_null ? (const uint8_t *)"" : buf + record->key.at;
        adq_store_u32((uint8_t *)PyBytes_AS_STRING(hashes) + 4 * i,
                      adq_crc32(0, key, record->key_null ? 0 : record->key.length));
    }
    if (pos != end) {
        *plain = 0;
        goto done;
    }
    result = Py_BuildValue("(OOOnn)", records, timestamps, hashes, (Py_ssize_t)largest, (Py_ssize_t)total);
done: /* a list's unset items are NULL, which its dealloc skips */
    Py_XDECREF(timestamp);
    PyMem_Free(record);
    Py_XDECREF(records);
    Py_XDECREF(timestamps);
    Py_XDECREF(hashes);
    return result;
}

static int int64_arg(PyObject *object, const char *name, int64_t *value) {
    if (!PyLong_Check(object)) {
        PyErr_Format(PyExc_TypeError, "kafka_stored_records: %s is an int", name);
        return -1;
    }
    long long v = PyLong_AsLongLong(object);
    if (v == -1 && PyErr_Occurred()) return -1;
    *value = v;
    return 0;
}

/* kafka_stored_records(buf, pos, end, count, base_timestamp_ms, now_ns, nulls_header) */
PyObject *adq_py_kafka_stored_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "kafka_stored_records(buf, pos, end, count, base_timestamp_ms, now_ns, "
                                         "nulls_header) takes 7 arguments");
        return NULL;
    }
    int64_t pos, end, count, base_timestamp_ms, now_ns;
    if (int64_arg(args[1], "pos", &pos) < 0 || int64_arg(args[2], "end", &end) < 0 ||
        int64_arg(args[3], "count", &count) < 0 || int64_arg(args[4], "base_timestamp_ms", &base_timestamp_ms) < 0 ||
        int64_arg(args[5], "now_ns", &now_ns) < 0)
        return NULL;
    if (!PyUnicode_CheckExact(args[6])) {
        PyErr_SetString(PyExc_TypeError, "kafka_stored_records: nulls_header is a str");
        return NULL;
    }
    Py_ssize_t nulls_length;
    const char *nulls_name = PyUnicode_AsUTF8AndSize(args[6], &nulls_length);
    if (nulls_name == NULL) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    if (pos < 0 || pos > end || end > (int64_t)view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "kafka_stored_records: 0 <= pos <= end <= len(buf)");
        return NULL;
    }
    int plain = 1;
    PyObject *result = stored_section(view.buf, (size_t)pos, (size_t)end, count, base_timestamp_ms, now_ns, nulls_name,
                                      (size_t)nulls_length, &plain);
    PyBuffer_Release(&view);
    if (result == NULL && !plain && !PyErr_Occurred()) Py_RETURN_NONE;
    return result;
}
