/* Recovery's and check's scan, and a search (the reference's scan_columns and next_valid_record; recovery
 * no longer searches with the latter, see codec.py).
 *
 * scan_columns(buf, pos, max_record_bytes) -> (positions, sizes, timestamps, stop): the whole, valid
 * records from pos on, as columns, and the position where the scan stopped: the end of the buffer,
 * or the start of the first record that is torn or bad (the caller asks the reference which, and for
 * its error). next_valid_record(buf, start, max_record_bytes) -> position or None: the first position
 * at or after start where a whole, valid record begins, trying only where the magic byte fits. */
#include "../core.h"

static int append_size(PyObject *list, size_t value) {
    PyObject *number = PyLong_FromSize_t(value);
    if (number == NULL) return -1;
    int failed = PyList_Append(list, number);
    Py_DECREF(number);
    return failed;
}

static int append_i64(PyObject *list, int64_t value) {
    PyObject *number = PyLong_FromLongLong(value);
    if (number == NULL) return -1;
    int failed = PyList_Append(list, number);
    Py_DECREF(number);
    return failed;
}

PyObject *adq_py_scan_columns(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "scan_columns takes 3 arguments");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    unsigned long long max_record_bytes = PyLong_AsUnsignedLongLong(args[2]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *result = NULL;
    PyObject *positions = PyList_New(0);
    PyObject *sizes = PyList_New(0);
    PyObject *timestamps = PyList_New(0);
    if (positions == NULL || sizes == NULL || timestamps == NULL) goto done;
    const uint8_t *buf = (const uint8_t *)view.buf;
    size_t limit = (size_t)view.len;
    size_t pos = start < 0 ? 0 : (size_t)start;
    adq_record record;
    while (pos < limit && adq_check_record(buf, limit, pos, max_record_bytes, &record) == ADQ_RECORD_OK) {
        if (append_size(positions, pos) < 0 || append_size(sizes, record.size) < 0 ||
            append_i64(timestamps, record.timestamp_ns) < 0)
            goto done;
        pos += record.size;
    }
    result = Py_BuildValue("(OOOn)", positions, sizes, timestamps, (Py_ssize_t)(pos < limit ? pos : limit));
done:
    Py_XDECREF(positions);
    Py_XDECREF(sizes);
    Py_XDECREF(timestamps);
    PyBuffer_Release(&view);
    return result;
}

PyObject *adq_py_next_valid_record(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "next_valid_record takes 3 arguments");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    unsigned long long max_record_bytes = PyLong_AsUnsignedLongLong(args[2]);
    if (PyErr_Occurred()) return NULL;
    if (start < 0) {
        PyErr_SetString(PyExc_ValueError, "start must not be negative");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    const uint8_t *buf = (const uint8_t *)view.buf;
    size_t limit = (size_t)view.len;
    size_t from = (size_t)start + ADQ_MAGIC_AT;
    Py_ssize_t found = -1;
    adq_record record;
    while (from < limit) {
        const uint8_t *hit = memchr(buf + from, ADQ_MAGIC_V1, limit - from);
        if (hit == NULL) break;
        size_t candidate = (size_t)(hit - buf) - ADQ_MAGIC_AT;
        if (adq_check_record(buf, limit, candidate, max_record_bytes, &record) == ADQ_RECORD_OK) {
            found = (Py_ssize_t)candidate;
            break;
        }
        from = (size_t)(hit - buf) + 1;
    }
    PyBuffer_Release(&view);
    if (found < 0) Py_RETURN_NONE;
    return PyLong_FromSsize_t(found);
}
