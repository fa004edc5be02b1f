/* A Produce request's record batches, and a batch's records: the reference's decode_batches and
 * decode_records (adiskq/kafka/wire/codec.py, which has the format).
 *
 * kafka_decode_records(buf, pos, end, count, base_timestamp_ms, KafkaRecord) -> list | None
 *     exactly `count` records filling buf[pos:end] (buf: any contiguous buffer).
 * kafka_decode_batches(data, max_bytes, KafkaRecord, KafkaBatch[, now_ns, nulls_header, EncodedRun])
 *     -> list | None
 *     every batch of `data`, when all are uncompressed. With the last three arguments (a Produce's
 *     write, adiskq/kafka/_records.py decode_produce), each batch's records are not KafkaRecords but
 *     the run of stored records kafka_stored_records makes of them (kafka/mapping.c), as a
 *     EncodedRun; and None as well for a LogAppendTime batch, or records off that path (the
 *     reference's decode_produce then takes them step by step).
 * None means "not here": a compressed batch (decompression stays in Python, through its library), or
 * bytes the reference must name the fault of. Nothing is allocated for a record count before the
 * records are there: a count above what the bytes can hold is None at once.
 *
 * A KafkaRecord (a tuple) and its headers (a list) are objects the cyclic GC tracks. Built tracked,
 * the thousands of a batch set off a young-generation collection every few hundred records, each
 * walking the records built so far: measured at two thirds of the decoder's time. So they are built
 * untracked (nothing can refer to them but the records list being filled) and all tracked at once
 * when the batch is whole; the next collection then walks each one once. */
#include "codec.h"

/* A varint length and that many bytes (NULL length -1: Py_None), or NULL for bad bytes (*bad set)
 * or a Python error (*bad clear). */
static PyObject *read_field(const uint8_t *buf, size_t *pos, size_t end, int *bad) {
    int64_t length;
    if (kq_read_varint(buf, pos, end, 5, &length) < 0 || length < -1) {
        *bad = 1;
        return NULL;
    }
    if (length == -1) return Py_NewRef(Py_None);
    if ((uint64_t)length > end - *pos) {
        *bad = 1;
        return NULL;
    }
    PyObject *field = PyBytes_FromStringAndSize((const char *)buf + *pos, (Py_ssize_t)length);
    *pos += (size_t)length;
    return field;
}

/* What a batch's records share, kept while they are decoded: the timestamp of the record decoded
 * last (records of one millisecond, most of a batch a client lingered over, share one int), and the
 * ASCII header names of the last record by position (the records of a batch mostly carry the same
 * headers in the same order: a name equal to the one before is the same str, not decoded again). */
#define NAMES_KEPT 8
typedef struct {
    PyObject *timestamp; /* NULL before the first record */
    int64_t timestamp_ms;
    PyObject *names[NAMES_KEPT];
} shared_objects;

static void release_shared(shared_objects *shared) {
    Py_CLEAR(shared->timestamp);
    for (int i = 0; i < NAMES_KEPT; i++) Py_CLEAR(shared->names[i]);
}

static PyObject *timestamp_object(shared_objects *shared, int64_t value) {
    if (shared->timestamp == NULL || shared->timestamp_ms != value) {
        PyObject *object = PyLong_FromLongLong(value);
        if (object == NULL) return NULL;
        Py_XSETREF(shared->timestamp, object);
        shared->timestamp_ms = value;
    }
    return Py_NewRef(shared->timestamp);
}

/* The header name of `length` bytes at `text`, the `position`th of its record. */
static PyObject *header_name(shared_objects *shared, Py_ssize_t position, const uint8_t *text, size_t length) {
    PyObject *kept = position < NAMES_KEPT ? shared->names[position] : NULL;
    /* a kept name is ASCII: its characters are its UTF-8 bytes */
    if (kept != NULL && (size_t)PyUnicode_GET_LENGTH(kept) == length && memcmp(PyUnicode_DATA(kept), text, length) == 0)
        return Py_NewRef(kept);
    PyObject *name = PyUnicode_DecodeUTF8((const char *)text, (Py_ssize_t)length, "strict");
    if (name != NULL && position < NAMES_KEPT && PyUnicode_IS_ASCII(name))
        Py_XSETREF(shared->names[position], Py_NewRef(name));
    return name;
}

static PyObject *read_headers(const uint8_t *buf, size_t *pos, size_t end, shared_objects *shared, int *bad) {
    int64_t count;
    if (kq_read_varint(buf, pos, end, 5, &count) < 0 || count < 0 || (uint64_t)count > (end - *pos) / 2) {
        *bad = 1; /* a header takes at least two bytes (two one-byte lengths) */
        return NULL;
    }
    PyObject *headers = PyList_New((Py_ssize_t)count);
    if (headers == NULL) return NULL;
    PyObject_GC_UnTrack(headers); /* tracked with its record (see the top of this file) */
    for (Py_ssize_t h = 0; h < (Py_ssize_t)count; h++) {
        int64_t name_len;
        if (kq_read_varint(buf, pos, end, 5, &name_len) < 0 || name_len < 0 || (uint64_t)name_len > end - *pos) {
            *bad = 1; /* a null header key (-1) is refused as well */
            Py_DECREF(headers);
            return NULL;
        }
        PyObject *name = header_name(shared, h, buf + *pos, (size_t)name_len);
        if (name == NULL) {
            if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                PyErr_Clear();
                *bad = 1;
            }
            Py_DECREF(headers);
            return NULL;
        }
        *pos += (size_t)name_len;
        PyObject *value = read_field(buf, pos, end, bad);
        PyObject *pair = value == NULL ? NULL : PyTuple_Pack(2, name, value);
        Py_DECREF(name);
        Py_XDECREF(value);
        if (pair == NULL) {
            Py_DECREF(headers);
            return NULL;
        }
        PyList_SET_ITEM(headers, h, pair);
    }
    return headers;
}

/* One record at buf[*pos:end] as an untracked KafkaRecord, or NULL (*bad set for bad bytes). */
static PyObject *read_record(const uint8_t *buf, size_t *pos, size_t end, int64_t base_timestamp_ms,
                             PyTypeObject *record_type, shared_objects *shared, int *bad) {
    int64_t length, timestamp_delta, offset_delta, timestamp_ms;
    if (kq_read_varint(buf, pos, end, 5, &length) < 0 || length < KQ_MIN_RECORD_BODY ||
        (uint64_t)length > end - *pos) {
        *bad = 1;
        return NULL;
    }
    size_t record_end = *pos + (size_t)length;
    size_t p = *pos + 1; /* attributes: unused */
    if (kq_read_varint(buf, &p, record_end, 10, &timestamp_delta) < 0 ||
        __builtin_add_overflow(base_timestamp_ms, timestamp_delta, &timestamp_ms) ||
        kq_read_varint(buf, &p, record_end, 5, &offset_delta) < 0) {
        *bad = 1;
        return NULL;
    }
    PyObject *record = record_type->tp_alloc(record_type, KQ_RECORD_FIELDS);
    if (record == NULL) return NULL;
    PyObject_GC_UnTrack(record);
    PyObject *field;
    if ((field = PyLong_FromLongLong(offset_delta)) == NULL) goto fail;
    PyTuple_SET_ITEM(record, 0, field);
    if ((field = timestamp_object(shared, timestamp_ms)) == NULL) goto fail;
    PyTuple_SET_ITEM(record, 1, field);
    if ((field = read_field(buf, &p, record_end, bad)) == NULL) goto fail;
    PyTuple_SET_ITEM(record, 2, field);
    if ((field = read_field(buf, &p, record_end, bad)) == NULL) goto fail;
    PyTuple_SET_ITEM(record, 3, field);
    if ((field = read_headers(buf, &p, record_end, shared, bad)) == NULL) goto fail;
    PyTuple_SET_ITEM(record, 4, field);
    if (p != record_end) {
        *bad = 1;
        goto fail;
    }
    *pos = record_end;
    return record;
fail:
    Py_DECREF(record); /* tp_alloc zeroed the items: the unset ones are NULL, which dealloc skips */
    return NULL;
}

/* The records of a batch, or NULL (*bad set for bad bytes). */
static PyObject *read_records(const uint8_t *buf, size_t pos, size_t end, int64_t count, int64_t base_timestamp_ms,
                              PyTypeObject *record_type, int *bad) {
    /* every record takes at least 7 bytes: a larger count cannot be right, and is not allocated for */
    if (count < 0 || (uint64_t)count > (end - pos) / (KQ_MIN_RECORD_BODY + 1)) {
        *bad = 1;
        return NULL;
    }
    PyObject *records = PyList_New((Py_ssize_t)count);
    if (records == NULL) return NULL;
    shared_objects shared = {0};
    for (Py_ssize_t i = 0; i < (Py_ssize_t)count; i++) {
        PyObject *record = read_record(buf, &pos, end, base_timestamp_ms, record_type, &shared, bad);
        if (record == NULL) {
            release_shared(&shared);
            Py_DECREF(records); /* untracked records and headers are freed as any others */
            return NULL;
        }
        PyList_SET_ITEM(records, i, record);
    }
    release_shared(&shared);
    if (pos != end) {
        *bad = 1;
        Py_DECREF(records);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < (Py_ssize_t)count; i++) {
        PyObject *record = PyList_GET_ITEM(records, i);
        PyObject_GC_Track(PyTuple_GET_ITEM(record, 4));
        PyObject_GC_Track(record);
    }
    return records;
}

static int size_arg(PyObject *object, const char *name, size_t *value) {
    if (!PyLong_Check(object)) {
        PyErr_Format(PyExc_TypeError, "%s is an int", name);
        return -1;
    }
    Py_ssize_t v = PyLong_AsSsize_t(object);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v < 0) {
        PyErr_Format(PyExc_ValueError, "%s must not be negative", name);
        return -1;
    }
    *value = (size_t)v;
    return 0;
}

static int int64_arg(PyObject *object, const char *name, int64_t *value) {
    if (!PyLong_Check(object)) {
        PyErr_Format(PyExc_TypeError, "%s is an int", name);
        return -1;
    }
    long long v = PyLong_AsLongLong(object);
    if (v == -1 && PyErr_Occurred()) return -1;
    *value = v;
    return 0;
}

/* kafka_decode_records(buf, pos, end, count, base_timestamp_ms, KafkaRecord) */
PyObject *adq_py_kafka_decode_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError,
                        "kafka_decode_records(buf, pos, end, count, base_timestamp_ms, KafkaRecord) takes 6 arguments");
        return NULL;
    }
    size_t pos, end;
    int64_t count, base_timestamp_ms;
    if (size_arg(args[1], "pos", &pos) < 0 || size_arg(args[2], "end", &end) < 0 ||
        int64_arg(args[3], "count", &count) < 0 || int64_arg(args[4], "base_timestamp_ms", &base_timestamp_ms) < 0 ||
        kq_check_tuple_type(args[5], "KafkaRecord") < 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    if (pos > end || end > (size_t)view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "kafka_decode_records: pos <= end <= len(buf)");
        return NULL;
    }
    int bad = 0;
    PyObject *records = read_records(view.buf, pos, end, count, base_timestamp_ms, (PyTypeObject *)args[5], &bad);
    PyBuffer_Release(&view);
    if (records == NULL && bad) Py_RETURN_NONE;
    return records;
}

static PyObject *new_batch(PyTypeObject *batch_type, const uint8_t *at, PyObject *records) {
    PyObject *batch = batch_type->tp_alloc(batch_type, KQ_BATCH_FIELDS);
    if (batch == NULL) {
        Py_DECREF(records);
        return NULL;
    }
    long long fields[KQ_BATCH_FIELDS - 1] = {
        (int64_t)kq_load_be64(at),                          /* base_offset */
        (int32_t)kq_load_be32(at + 12),                     /* partition_leader_epoch */
        (int16_t)kq_load_be16(at + KQ_ATTRIBUTES_AT),       /* attributes */
        (int32_t)kq_load_be32(at + KQ_ATTRIBUTES_AT + 2),   /* last_offset_delta */
        (int64_t)kq_load_be64(at + KQ_ATTRIBUTES_AT + 6),   /* base_timestamp_ms */
        (int64_t)kq_load_be64(at + KQ_ATTRIBUTES_AT + 14),  /* max_timestamp_ms */
        (int64_t)kq_load_be64(at + KQ_ATTRIBUTES_AT + 22),  /* producer_id */
        (int16_t)kq_load_be16(at + KQ_ATTRIBUTES_AT + 30),  /* producer_epoch */
        (int32_t)kq_load_be32(at + KQ_ATTRIBUTES_AT + 32),  /* base_sequence */
    };
    for (int i = 0; i < KQ_BATCH_FIELDS - 1; i++) {
        PyObject *field = PyLong_FromLongLong(fields[i]);
        if (field == NULL) {
            Py_DECREF(records);
            Py_DECREF(batch);
            return NULL;
        }
        PyTuple_SET_ITEM(batch, i, field);
    }
    PyTuple_SET_ITEM(batch, KQ_BATCH_FIELDS - 1, records);
    return batch;
}

/* How a Produce's write takes the records: as runs of stored records (kafka/mapping.c). */
typedef struct {
    int64_t now_ns;
    const char *nulls_name;
    size_t nulls_length;
    PyTypeObject *type; /* EncodedRun */
} stored_mode;

#define KQ_LOG_APPEND_TIME 0x08 /* attributes bit 3: the broker stamps the records */

/* Every batch of buf[0:limit] appended to `batches` (its records as runs with `stored`): 0, -1 for a
 * Python error, 1 for "not here". */
static int read_batches(const uint8_t *buf, size_t limit, uint64_t budget, PyTypeObject *record_type,
                        PyTypeObject *batch_type, const stored_mode *stored, PyObject *batches) {
    if (limit == 0) return 1;
    size_t pos = 0;
    while (pos < limit) {
        if (limit - pos < KQ_LENGTH_PREFIX_BYTES + 5 || buf[pos + KQ_MAGIC_AT] != KQ_MAGIC) return 1;
        int32_t batch_length = (int32_t)kq_load_be32(buf + pos + 8);
        if (batch_length < KQ_MIN_BATCH_LENGTH || (size_t)batch_length > limit - pos - KQ_LENGTH_PREFIX_BYTES)
            return 1;
        size_t end = pos + KQ_LENGTH_PREFIX_BYTES + (size_t)batch_length;
        const uint8_t *at = buf + pos;
        if (adq_crc32c(0, at + KQ_ATTRIBUTES_AT, end - pos - KQ_ATTRIBUTES_AT) != kq_load_be32(at + KQ_CRC_AT))
            return 1;
        uint16_t attributes = kq_load_be16(at + KQ_ATTRIBUTES_AT);
        if (attributes & (KQ_TRANSACTIONAL | KQ_CONTROL | KQ_COMPRESSION_MASK)) return 1;
        int32_t count = (int32_t)kq_load_be32(at + KQ_HEADER_BYTES - 4);
        size_t records_at = pos + KQ_HEADER_BYTES;
        if (end - records_at > budget) return 1;
        budget -= end - records_at;
        int bad = 0;
        int64_t base_timestamp_ms = (int64_t)kq_load_be64(at + KQ_ATTRIBUTES_AT + 6);
        PyObject *records;
        if (stored == NULL) {
            records = read_records(buf, records_at, end, count, base_timestamp_ms, record_type, &bad);
        } else {
            if (attributes & KQ_LOG_APPEND_TIME) return 1; /* every record stamped with the time of the write */
            int plain = 1;
            records = kq_stored_section(buf, records_at, end, count, base_timestamp_ms, stored->now_ns,
                                        stored->nulls_name, stored->nulls_length, stored->type, &plain);
            bad = !plain;
        }
        if (records == NULL) return bad ? 1 : -1;
        PyObject *batch = new_batch(batch_type, at, records);
        if (batch == NULL) return -1;
        int appended = PyList_Append(batches, batch);
        Py_DECREF(batch);
        if (appended < 0) return -1;
        pos = end;
    }
    return 0;
}

/* kafka_decode_batches(data, max_bytes, KafkaRecord, KafkaBatch[, now_ns, nulls_header, EncodedRun]) */
PyObject *adq_py_kafka_decode_batches(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 4 && nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "kafka_decode_batches(data, max_bytes, KafkaRecord, KafkaBatch[, now_ns, "
                                         "nulls_header, EncodedRun]) takes 4 or 7 arguments");
        return NULL;
    }
    size_t max_bytes;
    if (size_arg(args[1], "max_bytes", &max_bytes) < 0 || kq_check_tuple_type(args[2], "KafkaRecord") < 0 ||
        kq_check_tuple_type(args[3], "KafkaBatch") < 0)
        return NULL;
    stored_mode mode, *stored = NULL;
    if (nargs == 7) {
        if (!PyLong_Check(args[4])) {
            PyErr_SetString(PyExc_TypeError, "kafka_decode_batches: now_ns is an int");
            return NULL;
        }
        mode.now_ns = PyLong_AsLongLong(args[4]);
        if (mode.now_ns == -1 && PyErr_Occurred()) return NULL;
        if (!PyUnicode_CheckExact(args[5])) {
            PyErr_SetString(PyExc_TypeError, "kafka_decode_batches: nulls_header is a str");
            return NULL;
        }
        Py_ssize_t nulls_length;
        mode.nulls_name = PyUnicode_AsUTF8AndSize(args[5], &nulls_length);
        if (mode.nulls_name == NULL || kq_check_tuple_type(args[6], "EncodedRun") < 0) return NULL;
        mode.nulls_length = (size_t)nulls_length;
        mode.type = (PyTypeObject *)args[6];
        stored = &mode;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *batches = PyList_New(0);
    int status = batches == NULL ? -1
                                 : read_batches(view.buf, (size_t)view.len, max_bytes, (PyTypeObject *)args[2],
                                                (PyTypeObject *)args[3], stored, batches);
    PyBuffer_Release(&view);
    if (status == 0) return batches;
    Py_XDECREF(batches);
    if (status < 0) return NULL;
    Py_RETURN_NONE;
}
