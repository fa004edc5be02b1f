/* A Fetch request's payload read in one call: the reference's fetch_request_reference
 * (adiskq/kafka/wire/fetch_request.py, which has the format and what "not here" means).
 *
 * kafka_fetch_request(message, at, version) -> (max_wait_ms, min_bytes, max_bytes, isolation_level, topics) | None
 *
 * None for bytes this reader does not take (cut short, malformed, or carrying a tagged field): the
 * gateway then reads the request with kio. Nothing is allocated for an array's count before its
 * elements are there: each element takes at least one byte, so a count is bounded by the bytes. */
#include "request_reader.h"

#define FR_FLEXIBLE 12
#define FR_TOPIC_IDS 13

static int fixed32(kq_request_reader *r, int32_t *value) {
    const uint8_t *p;
    if (kq_take(r, 4, &p) < 0) return -1;
    *value = (int32_t)kq_load_be32(p);
    return 0;
}

/* A string's bytes (not null), not decoded. */
static int name_bytes(kq_request_reader *r, const uint8_t **text, size_t *length) {
    int64_t size;
    if (kq_string_bytes(r, text, &size) < 0 || size < 0) return -1;
    *length = (size_t)size;
    return 0;
}

/* The topic name (str, valid UTF-8) or id (16 bytes): a new reference, NULL with *bad set for bytes
 * not taken, NULL with *bad clear for a Python error. */
static PyObject *read_topic(kq_request_reader *r, int by_id, int *bad) {
    const uint8_t *text;
    size_t length;
    if (by_id) {
        if (kq_take(r, 16, &text) < 0) {
            *bad = 1;
            return NULL;
        }
        return PyBytes_FromStringAndSize((const char *)text, 16);
    }
    if (name_bytes(r, &text, &length) < 0) {
        *bad = 1;
        return NULL;
    }
    PyObject *name = PyUnicode_DecodeUTF8((const char *)text, (Py_ssize_t)length, "strict");
    if (name == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        *bad = 1;
    }
    return name;
}

/* One topic's partitions into a new list; NULL as read_topic. */
static PyObject *read_partitions(kq_request_reader *r, long version, int *bad) {
    int64_t count;
    if (kq_count_of(r, &count) < 0) {
        *bad = 1;
        return NULL;
    }
    PyObject *partitions = PyList_New(0);
    if (partitions == NULL) return NULL;
    for (int64_t i = 0; i < count; i++) {
        int32_t partition, max_bytes;
        const uint8_t *offset;
        if (fixed32(r, &partition) < 0 || (version >= 9 && kq_take(r, 4, NULL) < 0) || kq_take(r, 8, &offset) < 0 ||
            (version >= 12 && kq_take(r, 4, NULL) < 0) || (version >= 5 && kq_take(r, 8, NULL) < 0) ||
            fixed32(r, &max_bytes) < 0 || kq_no_tags(r) < 0) {
            *bad = 1;
            Py_DECREF(partitions);
            return NULL;
        }
        PyObject *item = Py_BuildValue("(iLi)", partition, (long long)(int64_t)kq_load_be64(offset), max_bytes);
        if (item == NULL || PyList_Append(partitions, item) < 0) {
            Py_XDECREF(item);
            Py_DECREF(partitions);
            return NULL;
        }
        Py_DECREF(item);
    }
    return partitions;
}

static PyObject *read_request(kq_request_reader *r, long version, int *bad) {
    int by_id = version >= FR_TOPIC_IDS;
    int32_t max_wait, min_bytes, max_bytes;
    const uint8_t *isolation_level;
    int64_t count;
    if ((version <= 14 && kq_take(r, 4, NULL) < 0) || fixed32(r, &max_wait) < 0 || fixed32(r, &min_bytes) < 0 ||
        fixed32(r, &max_bytes) < 0 || kq_take(r, 1, &isolation_level) < 0 ||
        (version >= 7 && kq_take(r, 8, NULL) < 0) || kq_count_of(r, &count) < 0) {
        *bad = 1;
        return NULL;
    }
    PyObject *topics = PyList_New(0);
    if (topics == NULL) return NULL;
    for (int64_t i = 0; i < count; i++) {
        PyObject *topic = read_topic(r, by_id, bad);
        if (topic == NULL) goto fail;
        PyObject *partitions = read_partitions(r, version, bad);
        if (partitions == NULL) {
            Py_DECREF(topic);
            goto fail;
        }
        if (kq_no_tags(r) < 0) {
            *bad = 1;
            Py_DECREF(topic);
            Py_DECREF(partitions);
            goto fail;
        }
        PyObject *item = PyTuple_Pack(2, topic, partitions);
        Py_DECREF(topic);
        Py_DECREF(partitions);
        if (item == NULL || PyList_Append(topics, item) < 0) {
            Py_XDECREF(item);
            goto fail;
        }
        Py_DECREF(item);
    }
    if (version >= 7) { /* forgotten_topics_data: read past */
        if (kq_count_of(r, &count) < 0) goto bad_bytes;
        for (int64_t i = 0; i < count; i++) {
            int64_t partitions;
            if (by_id) {
                if (kq_take(r, 16, NULL) < 0) goto bad_bytes;
            } else { /* a name: decoded (and dropped) so that what is not UTF-8 is refused, as the reference does */
                PyObject *name = read_topic(r, 0, bad);
                if (name == NULL) goto fail;
                Py_DECREF(name);
            }
            if (kq_count_of(r, &partitions) < 0 || (uint64_t)partitions > (r->end - r->at) / 4 ||
                kq_take(r, 4 * (size_t)partitions, NULL) < 0 || kq_no_tags(r) < 0)
                goto bad_bytes;
        }
    }
    if (version >= 11) { /* rack_id */
        const uint8_t *text;
        size_t length;
        if (name_bytes(r, &text, &length) < 0) goto bad_bytes;
        PyObject *rack = PyUnicode_DecodeUTF8((const char *)text, (Py_ssize_t)length, "strict");
        if (rack == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) goto fail;
            PyErr_Clear();
            goto bad_bytes;
        }
        Py_DECREF(rack);
    }
    if (kq_no_tags(r) < 0) goto bad_bytes;
    PyObject *request =
        Py_BuildValue("(iiiiN)", max_wait, min_bytes, max_bytes, (int)(int8_t)isolation_level[0], topics);
    return request;
bad_bytes:
    *bad = 1;
fail:
    Py_DECREF(topics);
    return NULL;
}

/* kafka_fetch_request(message, at, version) */
PyObject *adq_py_kafka_fetch_request(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    kq_request_reader reader;
    long version;
    if (kq_request_arguments(args, nargs, "kafka_fetch_request", "fetch_request", 4, 16, FR_FLEXIBLE, &reader,
                             &version) < 0)
        return NULL;
    int bad = 0;
    PyObject *request = read_request(&reader, version, &bad);
    if (request == NULL && bad) Py_RETURN_NONE;
    return request;
}
