/* Messages from a buffer of records: the reference's decode_messages, the read hot path.
 *
 * decode_messages(buf, partition, first_offset, count, max_record_bytes) takes exactly `count` records
 * that fill `buf` (bytes, or a contiguous buffer such as a view of a mapped segment; NotImplemented
 * for any other object) and returns their Messages, numbered from first_offset, every record
 * checked (log/codec_record.c). At the first record that is not whole and valid it returns (position, False)
 * instead, and (position, True) when the records end before the buffer does: the caller lets the
 * reference name what is wrong there, so errors and positions are the reference's own.
 *
 * A compressed record's value is decompressed with the dictionary its frame names, looked up in the
 * optional last argument (a dict of log/compression.c's prepared dictionaries by id); a record whose value will
 * not decompress, or whose dictionary is not there, answers (position, False) like any damage.
 *
 * A record whose headers hold a null value or a repeated name (Kafka's headers: its Message holds a
 * Headers, codec.py), and a record written in a Kafka transaction or a marker (attributes bit 2),
 * make the whole call answer NotImplemented: the reference decodes such buffers.
 *
 * A Message is a tuple (the NamedTuple adiskq.Message, seven fields, the tag last). One without
 * headers holds only ints, bytes, the shared empty headers and a str tag or None, so it can never be
 * part of a reference cycle: it is untracked, and the cyclic GC never walks the millions a batch read
 * can hold. */
#include "../core.h"

/* A checked record's headers as a dict; NotImplemented (a new reference) for a record with a null
 * value or a repeated name, whose Headers the reference builds (see the top of this file). */
static PyObject *headers_dict(const uint8_t *buf, const adq_record *record) {
    PyObject *headers = PyDict_New();
    if (headers == NULL) return NULL;
    const uint8_t *p = buf + record->headers_at;
    for (uint16_t h = 0; h < record->header_count; h++) {
        size_t name_len = adq_load_u16(p);
        size_t value_len = adq_load_u32(p + 2 + name_len);
        if (value_len == ADQ_NULL_HEADER_LENGTH) {
            Py_DECREF(headers);
            Py_RETURN_NOTIMPLEMENTED;
        }
        PyObject *name = PyUnicode_DecodeUTF8((const char *)p + 2, (Py_ssize_t)name_len, "strict");
        p += 2 + name_len;
        PyObject *value = PyBytes_FromStringAndSize((const char *)p + 4, (Py_ssize_t)value_len);
        p += 4 + value_len;
        int repeated = name == NULL ? 0 : PyDict_Contains(headers, name);
        if (repeated == 1) {
            Py_DECREF(name);
            Py_XDECREF(value);
            Py_DECREF(headers);
            Py_RETURN_NOTIMPLEMENTED;
        }
        if (name == NULL || value == NULL || repeated < 0 || PyDict_SetItem(headers, name, value) < 0) {
            Py_XDECREF(name);
            Py_XDECREF(value);
            Py_DECREF(headers);
            return NULL;
        }
        Py_DECREF(name);
        Py_DECREF(value);
    }
    return headers;
}

/* The timestamp of the record decoded last, kept so that the records of one push_many (which share one
 * timestamp) share one int object too: one allocation and one free fewer per message of a batch. */
typedef struct {
    PyObject *object; /* NULL before the first record */
    long long value;
} last_timestamp;

static PyObject *timestamp_object(last_timestamp *last, long long value) {
    if (last->object == NULL || last->value != value) {
        PyObject *object = PyLong_FromLongLong(value);
        if (object == NULL) return NULL;
        Py_XSETREF(last->object, object);
        last->value = value;
    }
    return Py_NewRef(last->object);
}

/* `value` is the decompressed value of a compressed record (taken over), or NULL to take the stored one. */
static PyObject *new_message(PyObject *partition, long long offset, const uint8_t *buf, const adq_record *record,
                             last_timestamp *last, PyObject *value) {
    /* Allocated untracked (or reused from the free list, log/values_message.c) and filled in place, not by
     * tp_alloc, which zeroes the items and tracks it: only a message with headers (a dict a user may
     * change) is handed to the cyclic GC; one without holds ints, bytes, the shared empty headers and
     * a str tag or None, which form no cycle. */
    PyObject *message = adq_message_new();
    if (message == NULL) {
        Py_XDECREF(value);
        return NULL;
    }
    PyObject **item = ((PyTupleObject *)message)->ob_item;
    item[0] = Py_NewRef(partition);
    item[1] = PyLong_FromLongLong(offset);
    item[2] = timestamp_object(last, record->timestamp_ns);
    item[3] = PyBytes_FromStringAndSize((const char *)buf + record->key_at, (Py_ssize_t)record->key_len);
    item[4] = value != NULL ? value
                            : PyBytes_FromStringAndSize((const char *)buf + record->value_at, adq_value_length(record));
    item[5] = record->header_count ? headers_dict(buf, record) : Py_NewRef(adq_empty_headers);
    item[6] = record->has_tag
                  ? PyUnicode_DecodeUTF8((const char *)buf + record->tag_at, (Py_ssize_t)record->tag_len, "strict")
                  : Py_NewRef(Py_None);
    if (item[5] == Py_NotImplemented) { /* headers only the reference holds: it decodes the buffer */
        Py_DECREF(message);
        Py_RETURN_NOTIMPLEMENTED;
    }
    if (item[1] == NULL || item[2] == NULL || item[3] == NULL || item[4] == NULL || item[5] == NULL ||
        item[6] == NULL) {
        Py_DECREF(message); /* untracked, its dealloc takes the items made and skips the NULLs */
        return NULL;
    }
    if (record->header_count) PyObject_GC_Track(message);
    return message;
}

/* The Messages of exactly `count` records that fill buf: the i-th numbered first_offset + i, or
 * offsets[i] when offsets (a tuple: nothing run while decoding can change it) is given. At a record that is not whole and valid, (position,
 * False); when the records end before the buffer does, (position, True): see the top of this file. */
static PyObject *decode_records(const uint8_t *buf, size_t limit, PyObject *partition, long long first_offset,
                                PyObject *offsets, Py_ssize_t count, unsigned long long max_record_bytes,
                                PyObject *dictionaries) {
    /* No more records than bytes can hold: a damaged count must not allocate a huge list. */
    Py_ssize_t most = (Py_ssize_t)(limit / ADQ_MIN_RECORD_BYTES);
    PyObject *messages = PyList_New(count <= most ? count : most);
    if (messages == NULL) return NULL;
    size_t pos = 0;
    adq_record record;
    last_timestamp last = {NULL, 0};
    adq_zstd_last last_dictionary = {0, NULL};
    PyObject *answer = messages;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (i >= most || adq_check_record(buf, limit, pos, max_record_bytes, &record) != ADQ_RECORD_OK) {
            answer = Py_BuildValue("(nO)", (Py_ssize_t)pos, Py_False);
            goto discard;
        }
        long long offset = first_offset + i; /* the caller checked it fits */
        if (offsets != NULL) {
            offset = PyLong_AsLongLong(PyTuple_GET_ITEM(offsets, i));
            if (offset == -1 && PyErr_Occurred()) {
                answer = NULL;
                goto discard;
            }
        }
        if (record.attributes & ADQ_TRANSACTIONAL) { /* transactions' records: the reference's */
            answer = Py_NewRef(Py_NotImplemented);
            goto discard;
        }
        PyObject *value = NULL;
        if (record.attributes & ADQ_COMPRESSED) {
            /* A value that will not decompress is the record's damage: the reference names it. */
            value = adq_zstd_decompress(buf + record.value_at, adq_value_length(&record), dictionaries,
                                        (size_t)max_record_bytes, &last_dictionary);
            if (value == NULL) {
                answer = PyErr_Occurred() ? NULL : Py_BuildValue("(nO)", (Py_ssize_t)pos, Py_False);
                goto discard;
            }
        }
        PyObject *message = new_message(partition, offset, buf, &record, &last, value);
        if (message == NULL || message == Py_NotImplemented) {
            answer = message; /* NULL for an error; NotImplemented (a new reference) for the reference */
            goto discard;
        }
        PyList_SET_ITEM(messages, i, message);
        pos += record.size;
    }
    if (pos != limit) answer = Py_BuildValue("(nO)", (Py_ssize_t)pos, Py_True);
discard:
    if (answer != messages) Py_DECREF(messages);
    Py_XDECREF(last.object);
    return answer;
}

PyObject *adq_py_decode_messages(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 5 && nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "decode_messages takes 5 or 6 arguments");
        return NULL;
    }
    PyObject *dictionaries = nargs == 6 ? args[5] : NULL;
    if (dictionaries == Py_None) dictionaries = NULL;
    if (dictionaries != NULL && !PyDict_CheckExact(dictionaries)) {
        PyErr_SetString(PyExc_TypeError, "decode_messages: dictionaries is a dict or None");
        return NULL;
    }
    if (adq_message_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "adiskq._compiled.configure() was not called");
        return NULL;
    }
    PyObject *partition = args[1];
    int wide = 0;
    long long first_offset = PyLong_AsLongLongAndOverflow(args[2], &wide);
    if (wide) Py_RETURN_NOTIMPLEMENTED; /* an offset outside i64: the reference numbers from it */
    if (first_offset == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t count = PyLong_AsSsize_t(args[3]);
    unsigned long long max_record_bytes = PyLong_AsUnsignedLongLong(args[4]);
    if (PyErr_Occurred()) return NULL;
    if (count < 0) {
        PyErr_SetString(PyExc_ValueError, "count must not be negative");
        return NULL;
    }
    if (count > 0 && first_offset > LLONG_MAX - (count - 1))
        Py_RETURN_NOTIMPLEMENTED; /* offsets past 2**63 - 1: the reference numbers them */
    /* bytes, or a view of a sealed segment's mapping (SegmentReader.read_span); anything that is not
     * one contiguous run of bytes is left to the reference. */
    Py_buffer view = {0};
    const uint8_t *buf;
    size_t limit;
    if (PyBytes_CheckExact(args[0])) {
        buf = (const uint8_t *)PyBytes_AS_STRING(args[0]);
        limit = (size_t)PyBytes_GET_SIZE(args[0]);
    } else if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) == 0) {
        buf = (const uint8_t *)view.buf;
        limit = (size_t)view.len;
    } else {
        PyErr_Clear();
        Py_RETURN_NOTIMPLEMENTED;
    }
    PyObject *answer = decode_records(buf, limit, partition, first_offset, NULL, count, max_record_bytes, dictionaries);
    if (view.obj != NULL) PyBuffer_Release(&view);
    return answer;
}

/* decode_at(buf, partition, offsets, max_record_bytes): decode_messages for records of offsets that
 * need not follow each other (a filtered read's candidates, read one by one and joined): the i-th
 * record's Message gets offsets[i]. Same checks and the same (position, bool) answer on a record that
 * is not whole and valid, or on records that end before the buffer does. */
PyObject *adq_py_decode_at(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 4 && nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "decode_at takes 4 or 5 arguments");
        return NULL;
    }
    PyObject *dictionaries = nargs == 5 ? args[4] : NULL;
    if (dictionaries == Py_None) dictionaries = NULL;
    if (dictionaries != NULL && !PyDict_CheckExact(dictionaries)) {
        PyErr_SetString(PyExc_TypeError, "decode_at: dictionaries is a dict or None");
        return NULL;
    }
    if (adq_message_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "adiskq._compiled.configure() was not called");
        return NULL;
    }
    if (!PyBytes_Check(args[0]) || !PyList_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError, "decode_at takes bytes and a list of offsets");
        return NULL;
    }
    PyObject *partition = args[1];
    unsigned long long max_record_bytes = PyLong_AsUnsignedLongLong(args[3]);
    if (PyErr_Occurred()) return NULL;
    /* A copy: an offset's __index__, or a collection the allocations start, could change the list. */
    PyObject *offsets = PyList_AsTuple(args[2]);
    if (offsets == NULL) return NULL;
    PyObject *answer = decode_records((const uint8_t *)PyBytes_AS_STRING(args[0]), (size_t)PyBytes_GET_SIZE(args[0]),
                                      partition, 0, offsets, PyTuple_GET_SIZE(offsets), max_record_bytes, dictionaries);
    Py_DECREF(offsets);
    return answer;
}
