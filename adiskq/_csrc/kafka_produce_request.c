/* A Produce request's payload read in one call: the reference's produce_request_reference
 * (adiskq/_sansio/kafka_produce_request.py, which has the format and what "not here" means).
 *
 * kafka_produce_request(message, at, version) -> (transactional_id, acks, timeout_ms, topics) | None
 *
 * None for bytes this reader does not take (cut short, malformed, or carrying a tagged field): the
 * gateway then reads the request with kio, after its request guard. Every count and length is held
 * against the bytes left (an element takes at least one byte), and the lists grow as elements are
 * read: nothing is allocated for a count. */
#include "kafka.h"

#define PR_FLEXIBLE 9

typedef struct {
    const uint8_t *buf;
    size_t at, end;
    int flexible;
} pr_reader;

static int take(pr_reader *r, size_t count, const uint8_t **chunk) {
    if (count > r->end - r->at) return -1;
    if (chunk != NULL) *chunk = r->buf + r->at;
    r->at += count;
    return 0;
}

/* An unsigned varint of at most 5 bytes and 32 bits. */
static int uvarint(pr_reader *r, uint64_t *value) {
    uint64_t v = 0;
    for (int shift = 0; shift < 35; shift += 7) {
        const uint8_t *p;
        if (take(r, 1, &p) < 0) return -1;
        v |= (uint64_t)(*p & 0x7F) << shift;
        if (!(*p & 0x80)) {
            if (v >> 32) return -1;
            *value = v;
            return 0;
        }
    }
    return -1;
}

/* A length: -1 for null; another negative one is not here. Flexible: a varint of length + 1;
 * otherwise big-endian, of `width` bytes (2 for a string, 4 for an array or a record set). */
static int length_of(pr_reader *r, int width, int64_t *length) {
    if (r->flexible) {
        uint64_t raw;
        if (uvarint(r, &raw) < 0) return -1;
        *length = (int64_t)raw - 1;
        return 0;
    }
    const uint8_t *p;
    if (take(r, (size_t)width, &p) < 0) return -1;
    *length = width == 2 ? (int16_t)kq_load_be16(p) : (int32_t)kq_load_be32(p);
    return *length < -1 ? -1 : 0;
}

/* An array's length: null, or more elements than bytes left, is not here. */
static int count_of(pr_reader *r, int64_t *count) {
    if (length_of(r, 4, count) < 0 || *count < 0 || (uint64_t)*count > r->end - r->at) return -1;
    return 0;
}

static int no_tags(pr_reader *r) {
    if (!r->flexible) return 0;
    uint64_t count;
    return uvarint(r, &count) < 0 || count != 0 ? -1 : 0;
}

/* A string (valid UTF-8) as a new reference, Py_None (new reference) for null: NULL with *bad set
 * for bytes not taken, NULL with *bad clear for a Python error. */
static PyObject *read_string(pr_reader *r, int *bad) {
    int64_t length;
    const uint8_t *text;
    if (length_of(r, 2, &length) < 0) {
        *bad = 1;
        return NULL;
    }
    if (length < 0) Py_RETURN_NONE;
    if (take(r, (size_t)length, &text) < 0) {
        *bad = 1;
        return NULL;
    }
    PyObject *string = PyUnicode_DecodeUTF8((const char *)text, (Py_ssize_t)length, "strict");
    if (string == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        *bad = 1;
    }
    return string;
}

/* One topic's partitions, [(index, records)], into a new list; NULL as read_string. */
static PyObject *read_partitions(pr_reader *r, int *bad) {
    int64_t count;
    if (count_of(r, &count) < 0) {
        *bad = 1;
        return NULL;
    }
    PyObject *partitions = PyList_New(0); /* grown as elements are read: never sized by a count */
    if (partitions == NULL) return NULL;
    for (int64_t i = 0; i < count; i++) {
        const uint8_t *index, *bytes = NULL;
        int64_t length;
        if (take(r, 4, &index) < 0 || length_of(r, 4, &length) < 0 ||
            (length >= 0 && take(r, (size_t)length, &bytes) < 0) || no_tags(r) < 0) {
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

static PyObject *read_request(pr_reader *r, int *bad) {
    PyObject *transactional_id = read_string(r, bad);
    if (transactional_id == NULL) return NULL;
    const uint8_t *acks, *timeout;
    int64_t count;
    PyObject *topics = NULL;
    if (take(r, 2, &acks) < 0 || take(r, 4, &timeout) < 0 || count_of(r, &count) < 0) goto bad_bytes;
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
        if (no_tags(r) < 0) {
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
    if (no_tags(r) < 0) goto bad_bytes;
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
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "kafka_produce_request(message, at, version) takes 3 arguments");
        return NULL;
    }
    if (!PyBytes_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "produce_request: message is bytes");
        return NULL;
    }
    if (!PyLong_Check(args[1]) || !PyLong_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "produce_request: at and version are ints");
        return NULL;
    }
    Py_ssize_t size = PyBytes_GET_SIZE(args[0]);
    int overflow = 0;
    long long at = PyLong_AsLongLongAndOverflow(args[1], &overflow);
    if (at == -1 && PyErr_Occurred()) return NULL;
    if (overflow || at < 0 || at > size) {
        PyErr_SetString(PyExc_ValueError, "produce_request: at is within the message");
        return NULL;
    }
    long long version = PyLong_AsLongLongAndOverflow(args[2], &overflow);
    if (version == -1 && PyErr_Occurred()) return NULL;
    if (overflow || version < 3 || version > 11) {
        PyErr_SetString(PyExc_ValueError, "produce_request: version must be within [3, 11]");
        return NULL;
    }
    pr_reader reader = {(const uint8_t *)PyBytes_AS_STRING(args[0]), (size_t)at, (size_t)size,
                        version >= PR_FLEXIBLE};
    int bad = 0;
    PyObject *request = read_request(&reader, &bad);
    if (request == NULL && bad) Py_RETURN_NONE;
    return request;
}
