/* A Kafka batch's records section as adiskq's stored records: the reference's stored_records
 * (adiskq/kafka/wire/mapping.py, which has the mapping rules; wire/codec.py has the Kafka format,
 * core.h adiskq's record layout).
 *
 * kafka_stored_records(buf, pos, end, count, base_timestamp_ms, now_ns, nulls_header)
 *     -> (data, index, timeindex, key_hashes, tagindex, largest) | None: an EncodedRun's fields
 *     the `count` records filling buf[pos:end] (uncompressed, of a CreateTime batch) as a run of
 *     stored records (adiskq/_sansio/run_entries.py): `data` the bytes encode_record writes for each
 *     record's stored value, key, headers and timestamp, back to back, as .data stores them;
 *     `index` and `timeindex` their .index entries (offset, position, size) and .timeindex entries
 *     (offset, timestamp in nanoseconds), numbered from offset 0 at position 0 (the write places
 *     them: place_entries); `key_hashes` the CRC-32 of each stored key (the key index's hash)
 *     as the key index stores them, a u32 little-endian each; `tagindex` b"" (a Kafka record
 *     carries no tag); `largest` the size of the largest record. None for anything off the plain path: bytes the Kafka decoder refuses, a record the
 *     mapping refuses (a null header value, a repeated header name, the reserved `nulls_header` as
 *     a name), one the encoder cannot store (a timestamp past 64 bits of nanoseconds, a header name
 *     over 65535 bytes, a record over 32 bits of size), or one of more than MAX_PLAIN_HEADERS
 *     headers. The caller then takes the step by step path, whose errors say what is wrong.
 *
 * No KafkaRecord, key, value or bytes object is made a record: each record is parsed into
 * positions in `buf`, then written once into the run's one bytes object, its entries into the
 * columns, so a Produce's write takes the columns as they are. */
#include "codec.h"

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

/* kq_read_varint, the one-byte varint (most of a plain record's) taken without its loop. */
static inline int read_varint(const uint8_t *buf, size_t *pos, size_t end, int max_bytes, int64_t *value) {
    size_t p = *pos;
    if (p < end && buf[p] < 0x80) {
        *value = (int64_t)(buf[p] >> 1) ^ -(int64_t)(buf[p] & 1);
        *pos = p + 1;
        return 0;
    }
    return kq_read_varint(buf, pos, end, max_bytes, value);
}

/* A varint length and that many bytes: 0, 1 for null (length -1), -1 for bad bytes. */
static inline int read_span(const uint8_t *buf, size_t *pos, size_t end, span *field) {
    int64_t length;
    if (read_varint(buf, pos, end, 5, &length) < 0 || length < -1) return -1;
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
    if (read_varint(buf, pos, end, 5, &length) < 0 || length < KQ_MIN_RECORD_BODY ||
        (uint64_t)length > end - *pos)
        return -1;
    size_t record_end = *pos + (size_t)length;
    size_t p = *pos + 1; /* attributes: unused */
    if (read_varint(buf, &p, record_end, 10, &timestamp_delta) < 0 ||
        __builtin_add_overflow(base_timestamp_ms, timestamp_delta, &record->timestamp_ms) ||
        read_varint(buf, &p, record_end, 5, &offset_delta) < 0)
        return -1;
    int status;
    if ((status = read_span(buf, &p, record_end, &record->key)) < 0) return -1;
    record->key_null = status;
    if ((status = read_span(buf, &p, record_end, &record->value)) < 0) return -1;
    record->value_null = status;
    if (read_varint(buf, &p, record_end, 5, &header_count) < 0 || header_count < 0 ||
        header_count > MAX_PLAIN_HEADERS)
        return -1;
    record->header_count = (Py_ssize_t)header_count;
    for (Py_ssize_t h = 0; h < record->header_count; h++) {
        span *name = &record->names[h];
        /* a null name is bad bytes, a null value refused by the mapping: both off the plain path */
        if (read_span(buf, &p, record_end, name) != 0 || !adq_is_utf8(buf + name->at, name->length) ||
            name->length > 0xFFFF || read_span(buf, &p, record_end, &record->values[h]) != 0)
            return -1;
        /* the reserved name, or one that starts with it (an escaped one, wire.mapping.stored_header_name):
         * the step by step path stores it */
        if (name->length >= nulls_length && memcmp(buf + name->at, nulls_name, nulls_length) == 0) return -1;
        for (Py_ssize_t before = 0; before < h; before++) /* a repeated name */
            if (record->names[before].length == name->length &&
                memcmp(buf + record->names[before].at, buf + name->at, name->length) == 0)
                return -1;
    }
    if (p != record_end) return -1;
    *pos = record_end;
    return 0;
}

/* The size of the stored record of a parsed one, as encode_record writes it; 0 when it cannot be
 * stored (over 32 bits). */
static uint64_t stored_size(const parsed_record *record, size_t nulls_length, size_t *nulls_text_length,
                            const char **nulls_text) {
    *nulls_text = NULL;
    *nulls_text_length = 0;
    if (record->key_null || record->value_null) {
        *nulls_text = record->key_null ? (record->value_null ? "key,value" : "key") : "value";
        *nulls_text_length = strlen(*nulls_text);
    }
    uint64_t size = ADQ_MIN_RECORD_BYTES + (uint64_t)(record->key_null ? 0 : record->key.length) +
                    (record->value_null ? 0 : record->value.length);
    for (Py_ssize_t h = 0; h < record->header_count; h++) size += 6 + record->names[h].length + record->values[h].length;
    if (*nulls_text != NULL) size += 6 + nulls_length + *nulls_text_length;
    return size > 0xFFFFFFFFu ? 0 : size;
}

/* Write the stored record of a parsed one at out (size bytes, from stored_size), as encode_record
 * writes it. */
static void write_stored_record(uint8_t *out, uint64_t size, const uint8_t *buf, const parsed_record *record,
                                int64_t timestamp_ns, const char *nulls_name, size_t nulls_length,
                                const char *nulls_text, size_t nulls_text_length) {
    size_t key_length = record->key_null ? 0 : record->key.length;
    size_t value_length = record->value_null ? 0 : record->value.length;
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
}

/* The five results of a plain section, as a tuple (of `type`, a tuple subclass, unless NULL), or NULL:
 * *plain 0 when it is not plain (no exception set).
 *
 * The records go into one bytes object, made large enough for records without headers at the start
 * (each stored record of no header is at most ADQ_MIN_RECORD_BYTES + the null marker's header
 * larger than its Kafka bytes), grown when headers need more, and cut to its size at the end. */
PyObject *kq_stored_section(const uint8_t *buf, size_t pos, size_t end, int64_t count, int64_t base_timestamp_ms,
                            int64_t now_ns, const char *nulls_name, size_t nulls_length, PyTypeObject *type,
                            int *plain) {
    /* every record takes at least 7 bytes: a larger count cannot be right, and is not allocated for */
    if (count < 0 || (uint64_t)count > (end - pos) / (KQ_MIN_RECORD_BODY + 1)) {
        *plain = 0;
        return NULL;
    }
    size_t per_record = ADQ_MIN_RECORD_BYTES + 6 + nulls_length + 9; /* 9: "key,value" */
    size_t capacity = (end - pos) + (size_t)count * per_record;
    if (capacity > (size_t)PY_SSIZE_T_MAX / 2) { /* far past any request the framing takes */
        *plain = 0;
        return NULL;
    }
    PyObject *data = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(capacity ? capacity : 1));
    PyObject *index = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)count * ADQ_INDEX_ENTRY_BYTES);
    PyObject *timeindex = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)count * ADQ_TIMEINDEX_ENTRY_BYTES);
    PyObject *hashes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)count * 4);
    PyObject *result = NULL;
    parsed_record *record = PyMem_Malloc(sizeof(parsed_record));
    if (data == NULL || index == NULL || timeindex == NULL || hashes == NULL || record == NULL) {
        if (record == NULL) PyErr_NoMemory();
        goto done;
    }
    uint8_t *index_out = (uint8_t *)PyBytes_AS_STRING(index);
    uint8_t *time_out = (uint8_t *)PyBytes_AS_STRING(timeindex);
    uint8_t *hash_out = (uint8_t *)PyBytes_AS_STRING(hashes);
    size_t largest = 0, total = 0;
    for (int64_t i = 0; i < count; i++) {
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
        const char *nulls_text;
        size_t nulls_text_length;
        uint64_t size = stored_size(record, nulls_length, &nulls_text_length, &nulls_text);
        if (size == 0) {
            *plain = 0;
            goto done;
        }
        if (size > capacity - total) { /* headers took more than the first guess: grow */
            size_t wanted = capacity * 2 > total + size ? capacity * 2 : total + (size_t)size;
            if (wanted > (size_t)PY_SSIZE_T_MAX || _PyBytes_Resize(&data, (Py_ssize_t)wanted) < 0) {
                if (!PyErr_Occurred()) PyErr_NoMemory();
                goto done;
            }
            capacity = wanted;
        }
        write_stored_record((uint8_t *)PyBytes_AS_STRING(data) + total, size, buf, record, timestamp_ns, nulls_name,
                            nulls_length, nulls_text, nulls_text_length);
        adq_store_u64(index_out, (uint64_t)i);
        adq_store_u64(index_out + 8, (uint64_t)total);
        adq_store_u64(index_out + 16, size);
        index_out += ADQ_INDEX_ENTRY_BYTES;
        adq_store_u64(time_out, (uint64_t)i);
        adq_store_u64(time_out + 8, (uint64_t)timestamp_ns);
        time_out += ADQ_TIMEINDEX_ENTRY_BYTES;
        if (size > largest) largest = (size_t)size;
        total += (size_t)size;
        const uint8_t *key = record->key_null ? (const uint8_t *)"" : buf + record->key.at;
        adq_store_u32(hash_out, adq_crc32(0, key, record->key_null ? 0 : record->key.length));
        hash_out += 4;
    }
    if (pos != end) {
        *plain = 0;
        goto done;
    }
    if (_PyBytes_Resize(&data, (Py_ssize_t)total) < 0) goto done;
    PyObject *largest_object = PyLong_FromSize_t(largest);
    if (largest_object == NULL) goto done;
    PyObject *no_tags = PyBytes_FromStringAndSize(NULL, 0);
    if (no_tags == NULL) {
        Py_DECREF(largest_object);
        goto done;
    }
    result = type == NULL ? PyTuple_New(6) : type->tp_alloc(type, 6);
    if (result == NULL) {
        Py_DECREF(largest_object);
        Py_DECREF(no_tags);
        goto done;
    }
    PyObject *fields[6] = {data, index, timeindex, hashes, no_tags, largest_object};
    for (int i = 0; i < 6; i++) PyTuple_SET_ITEM(result, i, fields[i]);
    data = index = timeindex = hashes = NULL; /* the tuple's now */
done:
    PyMem_Free(record);
    Py_XDECREF(data); /* NULL after a failed resize, which freed it */
    Py_XDECREF(index);
    Py_XDECREF(timeindex);
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
    PyObject *result = kq_stored_section(view.buf, (size_t)pos, (size_t)end, count, base_timestamp_ms, now_ns,
                                         nulls_name, (size_t)nulls_length, NULL, &plain);
    PyBuffer_Release(&view);
    if (result == NULL && !plain && !PyErr_Occurred()) Py_RETURN_NONE;
    return result;
}
