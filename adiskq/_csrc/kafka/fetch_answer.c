/* A whole Fetch response frame in one call: the reference's fetch_answer_reference
 * (adiskq/kafka/wire/fetch_answer.py, which has the format and the argument rules).
 *
 * kafka_fetch_answer(correlation_id, version, topics) -> bytes
 *
 * Two passes over the arguments: the first checks every one (in the reference's order, raising the
 * same exception class for the same fault) and sums the frame's size, the second writes the frame
 * into one bytes object of that size, record batches copied once. Nothing between the passes runs
 * Python code (no __index__, no __len__ of a subclass is called: exact C-level reads), so what the
 * first pass measured is what the second writes. */
#include "codec.h"

#define FA_FLEXIBLE 12
#define FA_TOPIC_IDS 13
#define FA_MAX_NAME 32767
#define FA_MAX_FRAME ((uint64_t)INT32_MAX)

static size_t uvarint_size(uint64_t value) {
    size_t size = 1;
    while (value >= 0x80) {
        value >>= 7;
        size++;
    }
    return size;
}

static uint8_t *write_uvarint(uint8_t *out, uint64_t value) {
    while (value >= 0x80) {
        *out++ = (uint8_t)((value & 0x7F) | 0x80);
        value >>= 7;
    }
    *out++ = (uint8_t)value;
    return out;
}

/* An int within [low, high] into *value: 0, or -1 with TypeError or ValueError. */
static int int_field(PyObject *object, const char *what, int64_t low, int64_t high, int64_t *value) {
    if (!PyLong_Check(object)) {
        PyErr_Format(PyExc_TypeError, "fetch_answer: %s is an int", what);
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(object, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (overflow || v < low || v > high) {
        PyErr_Format(PyExc_ValueError, "fetch_answer: %s must be within [%lld, %lld]", what, (long long)low,
                     (long long)high);
        return -1;
    }
    *value = v;
    return 0;
}

static size_t length_size(uint64_t count, int flexible) { return flexible ? uvarint_size(count + 1) : 4; }

static uint8_t *write_length(uint8_t *out, uint64_t count, int flexible) {
    if (flexible) return write_uvarint(out, count + 1);
    kq_store_be32(out, (uint32_t)count);
    return out + 4;
}

static const char PARTITION_SHAPE[] =
    "fetch_answer: a partition is a (partition, error_code, high_watermark, log_start_offset, batches) tuple";

/* The first pass: every argument checked, the frame's size after its own i32 into *total. */
static int measure(long version, PyObject *topics, uint64_t *total) {
    int flexible = version >= FA_FLEXIBLE;
    uint64_t size = 4 + (flexible ? 1 : 0) + 4 + (version >= 7 ? 6 : 0);
    Py_ssize_t topic_count = PySequence_Fast_GET_SIZE(topics);
    size += length_size((uint64_t)topic_count, flexible);
    PyObject **topic_items = PySequence_Fast_ITEMS(topics);
    for (Py_ssize_t t = 0; t < topic_count; t++) {
        PyObject *item = topic_items[t];
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
            PyErr_SetString(PyExc_TypeError, "fetch_answer: a topic is a (topic, partitions) tuple");
            return -1;
        }
        PyObject *topic = PyTuple_GET_ITEM(item, 0), *partitions = PyTuple_GET_ITEM(item, 1);
        if (version >= FA_TOPIC_IDS) {
            if (!PyBytes_Check(topic)) {
                PyErr_SetString(PyExc_TypeError, "fetch_answer: from version 13 a topic is its id's 16 bytes");
                return -1;
            }
            if (PyBytes_GET_SIZE(topic) != 16) {
                PyErr_SetString(PyExc_ValueError, "fetch_answer: a topic id is 16 bytes");
                return -1;
            }
            size += 16;
        } else {
            if (!PyUnicode_Check(topic)) {
                PyErr_SetString(PyExc_TypeError, "fetch_answer: up to version 12 a topic is its name, a str");
                return -1;
            }
            Py_ssize_t length;
            if (PyUnicode_AsUTF8AndSize(topic, &length) == NULL) return -1;
            if (length > FA_MAX_NAME) {
                PyErr_SetString(PyExc_ValueError, "fetch_answer: a topic name is at most 32767 bytes");
                return -1;
            }
            size += (flexible ? uvarint_size((uint64_t)length + 1) : 2) + (uint64_t)length;
        }
        if (!PyList_Check(partitions) && !PyTuple_Check(partitions)) {
            PyErr_SetString(PyExc_TypeError, "fetch_answer: a topic's partitions are a list");
            return -1;
        }
        Py_ssize_t partition_count = PySequence_Fast_GET_SIZE(partitions);
        size += length_size((uint64_t)partition_count, flexible);
        PyObject **partition_items = PySequence_Fast_ITEMS(partitions);
        for (Py_ssize_t p = 0; p < partition_count; p++) {
            PyObject *partition = partition_items[p];
            if (!PyTuple_Check(partition) || PyTuple_GET_SIZE(partition) != 5) {
                PyErr_SetString(PyExc_TypeError, PARTITION_SHAPE);
                return -1;
            }
            int64_t ignored;
            if (int_field(PyTuple_GET_ITEM(partition, 0), "a partition index", INT32_MIN, INT32_MAX, &ignored) < 0 ||
                int_field(PyTuple_GET_ITEM(partition, 1), "an error code", INT16_MIN, INT16_MAX, &ignored) < 0 ||
                int_field(PyTuple_GET_ITEM(partition, 2), "a high watermark", INT64_MIN, INT64_MAX, &ignored) < 0 ||
                int_field(PyTuple_GET_ITEM(partition, 3), "a log start offset", INT64_MIN, INT64_MAX, &ignored) < 0)
                return -1;
            PyObject *batches = PyTuple_GET_ITEM(partition, 4);
            if (!PyList_Check(batches)) {
                PyErr_SetString(PyExc_TypeError, "fetch_answer: a partition's batches are a list of bytes");
                return -1;
            }
            uint64_t records = 0;
            for (Py_ssize_t b = 0; b < PyList_GET_SIZE(batches); b++) {
                PyObject *batch = PyList_GET_ITEM(batches, b);
                if (!PyBytes_Check(batch)) {
                    PyErr_SetString(PyExc_TypeError, "fetch_answer: a partition's batches are a list of bytes");
                    return -1;
                }
                records += (uint64_t)PyBytes_GET_SIZE(batch);
            }
            if (records > FA_MAX_FRAME) {
                PyErr_SetString(PyExc_ValueError, "fetch_answer: the response is over 2 GiB");
                return -1;
            }
            size += 4 + 2 + 8 + 8 + (version >= 5 ? 8 : 0) + (flexible ? 1 : 4) + (version >= 11 ? 4 : 0);
            size += (flexible ? uvarint_size(records + 1) + 1 : 4) + records;
        }
        if (flexible) size += 1;
    }
    if (flexible) size += 1;
    if (size > FA_MAX_FRAME) {
        PyErr_SetString(PyExc_ValueError, "fetch_answer: the response is over 2 GiB");
        return -1;
    }
    *total = size;
    return 0;
}

/* The second pass: the frame written into out (measure's size, plus the i32 size in front). */
static void write_frame(uint8_t *out, int32_t correlation_id, long version, PyObject *topics, uint64_t size) {
    int flexible = version >= FA_FLEXIBLE;
    kq_store_be32(out, (uint32_t)size);
    kq_store_be32(out + 4, (uint32_t)correlation_id);
    out += 8;
    if (flexible) *out++ = 0;
    kq_store_be32(out, 0); /* throttle_time_ms */
    out += 4;
    if (version >= 7) { /* error_code, session_id */
        memset(out, 0, 6);
        out += 6;
    }
    Py_ssize_t topic_count = PySequence_Fast_GET_SIZE(topics);
    out = write_length(out, (uint64_t)topic_count, flexible);
    PyObject **topic_items = PySequence_Fast_ITEMS(topics);
    for (Py_ssize_t t = 0; t < topic_count; t++) {
        PyObject *topic = PyTuple_GET_ITEM(topic_items[t], 0), *partitions = PyTuple_GET_ITEM(topic_items[t], 1);
        if (version >= FA_TOPIC_IDS) {
            memcpy(out, PyBytes_AS_STRING(topic), 16);
            out += 16;
        } else {
            Py_ssize_t length;
            const char *name = PyUnicode_AsUTF8AndSize(topic, &length); /* cached by measure: cannot fail */
            if (flexible) {
                out = write_uvarint(out, (uint64_t)length + 1);
            } else {
                kq_store_be16(out, (uint16_t)length);
                out += 2;
            }
            memcpy(out, name, (size_t)length);
            out += length;
        }
        Py_ssize_t partition_count = PySequence_Fast_GET_SIZE(partitions);
        out = write_length(out, (uint64_t)partition_count, flexible);
        PyObject **partition_items = PySequence_Fast_ITEMS(partitions);
        for (Py_ssize_t p = 0; p < partition_count; p++) {
            PyObject *partition = partition_items[p];
            int64_t high_watermark = PyLong_AsLongLong(PyTuple_GET_ITEM(partition, 2));
            kq_store_be32(out, (uint32_t)PyLong_AsLong(PyTuple_GET_ITEM(partition, 0)));
            kq_store_be16(out + 4, (uint16_t)PyLong_AsLong(PyTuple_GET_ITEM(partition, 1)));
            kq_store_be64(out + 6, (uint64_t)high_watermark);
            kq_store_be64(out + 14, (uint64_t)high_watermark); /* last_stable_offset */
            out += 22;
            if (version >= 5) {
                kq_store_be64(out, (uint64_t)PyLong_AsLongLong(PyTuple_GET_ITEM(partition, 3)));
                out += 8;
            }
            if (flexible) { /* aborted_transactions: null */
                *out++ = 0;
            } else {
                kq_store_be32(out, UINT32_MAX);
                out += 4;
            }
            if (version >= 11) { /* preferred_read_replica: none */
                kq_store_be32(out, UINT32_MAX);
                out += 4;
            }
            PyObject *batches = PyTuple_GET_ITEM(partition, 4);
            uint64_t records = 0;
            for (Py_ssize_t b = 0; b < PyList_GET_SIZE(batches); b++)
                records += (uint64_t)PyBytes_GET_SIZE(PyList_GET_ITEM(batches, b));
            out = write_length(out, records, flexible);
            for (Py_ssize_t b = 0; b < PyList_GET_SIZE(batches); b++) {
                PyObject *batch = PyList_GET_ITEM(batches, b);
                memcpy(out, PyBytes_AS_STRING(batch), (size_t)PyBytes_GET_SIZE(batch));
                out += PyBytes_GET_SIZE(batch);
            }
            if (flexible) *out++ = 0;
        }
        if (flexible) *out++ = 0;
    }
    if (flexible) *out++ = 0;
}

/* kafka_fetch_answer(correlation_id, version, topics) */
PyObject *adq_py_kafka_fetch_answer(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "kafka_fetch_answer(correlation_id, version, topics) takes 3 arguments");
        return NULL;
    }
    int64_t correlation_id, version;
    if (int_field(args[0], "correlation_id", INT32_MIN, INT32_MAX, &correlation_id) < 0 ||
        int_field(args[1], "version", 4, 16, &version) < 0)
        return NULL;
    PyObject *topics = args[2];
    if (!PyList_Check(topics) && !PyTuple_Check(topics)) {
        PyErr_SetString(PyExc_TypeError, "fetch_answer: topics is a list of (topic, partitions)");
        return NULL;
    }
    uint64_t size;
    if (measure((long)version, topics, &size) < 0) return NULL;
    PyObject *frame = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(size + 4));
    if (frame == NULL) return NULL;
    write_frame((uint8_t *)PyBytes_AS_STRING(frame), (int32_t)correlation_id, (long)version, topics, size);
    return frame;
}
