/* A Fetch request's payload read in one call: the reference's fetch_request_reference
 * (adiskq/_sansio/kafka_fetch_request.py, which has the format and what "not here" means).
 *
 * kafka_fetch_request(message, at, version) -> (max_wait_ms, min_bytes, max_bytes, topics) | None
 *
 * None for bytes this reader does not take (cut short, malformed, or carrying a tagged field): the
 * gateway then reads the request with kio. Nothing is allocated for an array's count before its
 * elements are there: each element takes at least one byte, so a count is bounded by the bytes. */
#include "kafka.h"

#define FR_FLEXIBLE 12
#define FR_TOPIC_IDS 13

typedef struct {
    const uint8_t *buf;
    size_t at, end;
    int flexible;
} fr_reader;

static int take(fr_reader *r, size_t count, const uint8_t **chunk) {
    if (count > r->end - r->at) return -1;
    if (chunk != NULL) *chunk = r->buf + r->at;
    r->at += count;
    return 0;
}

static int fixed32(fr_reader *r, int32_t *value) {
    const uint8_t *p;
    if (take(r, 4, &p) < 0) return -1;
    *value = (int32_t)kq_load_be32(p);
    return 0;
}

/* An unsigned varint of at most 5 bytes and 32 bits. */
static int uvarint(fr_reader *r, uint64_t *value) {
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

/* An array's length: null or negative is not here. */
static int count_of(fr_reader *r, int64_t *count) {
    if (r->flexible) {
        uint64_t raw;
        if (uvarint(r, &raw) < 0 || raw == 0) return -1;
        *count = (int64_t)raw - 1;
        return 0;
    }
    int32_t raw;
    if (fixed32(r, &raw) < 0 || raw < 0) return -1;
    *count = raw;
    return 0;
}

/* A string's bytes (not null), not decoded. */
static int string_bytes(fr_reader *r, const uint8_t **text, size_t *length) {
    int64_t size;
    if (r->flexible) {
        uint64_t raw;
        if (uvarint(r, &raw) < 0 || raw == 0) return -1;
        size = (int64_t)raw - 1;
    } else {
        const uint8_t *p;
        if (take(r, 2, &p) < 0) return -1;
        size = (int16_t)kq_load_be16(p);
        if (size < 0) return -1;
    }
    *length = (size_t)size;
    return take(r, (size_t)size, text);
}

static int no_tags(fr_reader *r) {
    if (!r->flexible) return 0;
    uint64_t count;
    return uvarint(r, &count) < 0 || count != 0 ? -1 : 0;
}

/* The topic name (str, valid UTF-8) or id (16 bytes): a new reference, NULL with *bad set for bytes
 * not taken, NULL with *bad clear for a Python error. */
static PyObject *read_topic(fr_reader *r, int by_id, int *bad) {
    const uint8_t *text;
    size_t length;
    if (by_id) {
        if (take(r, 16, &text) < 0) {
            *bad = 1;
            return NULL;
        }
        return PyBytes_FromStringAndSize((const char *)text, 16);
    }
    if (string_bytes(r, &text, &length) < 0) {
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
static PyObject *read_partitions(fr_reader *r, long version, int *bad) {
    int64_t count;
    if (count_of(r, &count) < 0) {
        *bad = 1;
        return NULL;
    }
    PyObject *partitions = PyList_New(0);
    if (partitions == NULL) return NULL;
    for (int64_t i = 0; i < count; i++) {
        int32_t partition, max_bytes;
        const uint8_t *offset;
        if (fixed32(r, &partition) < 0 || (version >= 9 && take(r, 4, NULL) < 0) || take(r, 8, &offset) < 0 ||
            (version >= 12 && take(r, 4, NULL) < 0) || (version >= 5 && take(r, 8, NULL) < 0) ||
            fixed32(r, &max_bytes) < 0 || no_tags(r) < 0) {
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

static PyObject *read_request(fr_reader *r, long version, int *bad) {
    int by_id = version >= FR_TOPIC_IDS;
    int32_t max_wait, min_bytes, max_bytes;
    int64_t count;
    if ((version <= 14 && take(r, 4, NULL) < 0) || fixed32(r, &max_wait) < 0 || fixed32(r, &min_bytes) < 0 ||
        fixed32(r, &max_bytes) < 0 || take(r, 1, NULL) < 0 || (version >= 7 && take(r, 8, NULL) < 0) ||
        count_of(r, &count) < 0) {
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
        if (no_tags(r) < 0) {
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
        if (count_of(r, &count) < 0) goto bad_bytes;
        for (int64_t i = 0; i < count; i++) {
            int64_t partitions;
            if (by_id) {
                if (take(r, 16, NULL) < 0) goto bad_bytes;
            } else { /* a name: decoded (and dropped) so that what is not UTF-8 is refused, as the reference does */
                PyObject *name = read_topic(r, 0, bad);
                if (name == NULL) goto fail;
                Py_DECREF(name);
            }
            if (count_of(r, &partitions) < 0 || (uint64_t)partitions > (r->end - r->at) / 4 ||
                take(r, 4 * (size_t)partitions, NULL) < 0 || no_tags(r) < 0)
                goto bad_bytes;
        }
    }
    if (version >= 11) { /* rack_id */
        const uint8_t *text;
        size_t length;
        if (string_bytes(r, &text, &length) < 0) goto bad_bytes;
        PyObject *rack = PyUnicode_DecodeUTF8((const char *)text, (Py_ssize_t)length, "strict");
        if (rack == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) goto fail;
            PyErr_Clear();
            goto bad_bytes;
        }
        Py_DECREF(rack);
    }
    if (no_tags(r) < 0) goto bad_bytes;
    PyObject *request = Py_BuildValue("(iiiN)", max_wait, min_bytes, max_bytes, topics);
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
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "kafka_fetch_request(message, at, version) takes 3 arguments");
        return NULL;
    }
    if (!PyBytes_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "fetch_request: message is bytes");
        return NULL;
    }
    if (!PyLong_Check(args[1]) || !PyLong_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "fetch_request: at and version are ints");
        return NULL;
    }
    Py_ssize_t size = PyBytes_GET_SIZE(args[0]);
    int overflow = 0;
    long long at = PyLong_AsLongLongAndOverflow(args[1], &overflow);
    if (at == -1 && PyErr_Occurred()) return NULL;
    if (overflow || at < 0 || at > size) {
        PyErr_SetString(PyExc_ValueError, "fetch_request: at is within the message");
        return NULL;
    }
    long long version = PyLong_AsLongLongAndOverflow(args[2], &overflow);
    if (version == -1 && PyErr_Occurred()) return NULL;
    if (overflow || version < 4 || version > 16) {
        PyErr_SetString(PyExc_ValueError, "fetch_request: version must be within [4, 16]");
        return NULL;
    }
    fr_reader reader = {(const uint8_t *)PyBytes_AS_STRING(args[0]), (size_t)at, (size_t)size,
                        version >= FR_FLEXIBLE};
    int bad = 0;
    PyObject *request = read_request(&reader, (long)version, &bad);
    if (request == NULL && bad) Py_RETURN_NONE;
    return request;
}
