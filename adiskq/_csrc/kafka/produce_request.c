/* A Produce request's payload read in one call: the reference's produce_request_reference
 * (adiskq/kafka/wire/produce_request.py, which has the format and what "not here" means).
 *
 * kafka_produce_request(message, at, version) -> (transactional_id, acks, timeout_ms, topics) | None
 *
 * None for bytes this reader does not take (cut short, malformed, or carrying a tagged field): the
 * gateway then reads the request with kio, after its request guard. Every count and length is held
 * against the bytes left (an element takes at least one byte), and the lists grow as elements are
 * read: nothing is allocated for a count. */
#include "request_reader.h"

#define PR_FLEXIBLE 9

/* A string (valid UTF-8) as a new reference, Py_None (new reference) for null: NULL with *bad set
 * for bytes not taken, NULL with *bad clear for a Python error. */
static PyObject *read_string(kq_request_reader *r, int *bad) {
    int64_t length;
    const uint8_t *text;
    if (kq_string_bytes(r, &text, &length) < 0) {
        *bad = 1;
        return NULL;
    }
    if (length < 0) Py_RETURN_NONE;
    PyObject *string = PyUnicode_DecodeUTF8((const char *)text, (Py_ssize_t)length, "strict");
    if (string == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        *bad = 1;
    }
    return string;
}

/* One topic's partitions, [(index, records)], into a new list; NULL as read_string. */
static PyObject *read_partitions(kq_request_reader *r, int *bad) {
    int64_t count;
    if (kq_count_of(r, &count) < 0) {
        *bad = 1;
        return NULL;
    }
    PyObject *partitions = PyList_New(0); /* grown as elements are read: never sized by a count */
    if (partitions == NULL) return NULL;
    for (int64_t i = 0; i < count; i++) {
        const uint8_t *index, *bytes = NULL;
        int64_t length;
        if (kq_take(r, 4, &index) < 0 || kq_length_of(r, 4, &length) < 0 ||
            (length >= 0 && kq_take(r, (size_t)length, &bytes) < 0) || kq_no_tags(r) < 0) {
            *bad = 1;
            Py_DECREF(partitions);
            return NULL;
        }
        PyObject *records;
        if (length < 0) {
            Py_INCREF(Py_None);
            records = Py_None;
        } else {
            records = PyBytes_FromStringAndSize((const char *)bytes, (Py_ssize_t)length);
            if (records == NULL) {
                Py_DECREF(partitions);
                return NULL;
            }
        }
        PyObject *item = Py_BuildValue("(iN)", (int)(int32_t)kq_load_be32(index), records);
        if (item == NULL || PyList_Append(partitions, item) < 0) {
            Py_XDECREF(item);
            Py_DECREF(partitions);
            return NULL;
        }
        Py_DECREF(item);
    }
    return partitions;
}

static PyObject *read_request(kq_request_reader *r, int *bad) {
    PyObject *transactional_id = read_string(r, bad);
    if (transactional_id == NULL) return NULL;
    const uint8_t *acks, *timeout;
    int64_t count;
    PyObject *topics = NULL;
    if (kq_take(r, 2, &acks) < 0 || kq_take(r, 4, &timeout) < 0 || kq_count_of(r, &count) < 0) goto bad_bytes;
    topics = PyList_New(0);
    if (topics == NULL) goto fail;
    for (int64_t i = 0; i < count; i++) {
        PyObject *name = read_string(r, bad);
        if (name == NULL) goto fail;
        if (name == Py_None) { /* a topic is always named */
            Py_DECREF(name);
            goto bad_bytes;
        }
        PyObject *partitions = read_partitions(r, bad);
        if (partitions == NULL) {
            Py_DECREF(name);
            goto fail;
        }
        if (kq_no_tags(r) < 0) {
            Py_DECREF(name);
            Py_DECREF(partitions);
            goto bad_bytes;
        }
        PyObject *item = PyTuple_New(2);
        if (item == NULL) {
            Py_DECREF(name);
            Py_DECREF(partitions);
            goto fail;
        }
        PyTuple_SET_ITEM(item, 0, name);
        PyTuple_SET_ITEM(item, 1, partitions);
        int appended = PyList_Append(topics, item);
        Py_DECREF(item);
        if (appended < 0) goto fail;
    }
    if (kq_no_tags(r) < 0) goto bad_bytes;
    return Py_BuildValue("(NiiN)", transactional_id, (int)(int16_t)kq_load_be16(acks),
                         (int)(int32_t)kq_load_be32(timeout), topics);
bad_bytes:
    *bad = 1;
fail:
    Py_DECREF(transactional_id);
    Py_XDECREF(topics);
    return NULL;
}

/* kafka_produce_request(message, at, version) */
PyObject *adq_py_kafka_produce_request(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    kq_request_reader reader;
    long version;
    if (kq_request_arguments(args, nargs, "kafka_produce_request", "produce_request", 3, 12, PR_FLEXIBLE, &reader,
                             &version) < 0)
        return NULL;
    int bad = 0;
    PyObject *request = read_request(&reader, &bad);
    if (request == NULL && bad) Py_RETURN_NONE;
    return request;
}
