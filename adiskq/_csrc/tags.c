/* The tag column of a batch: tag_column(records) -> bytes, one u32 (little-endian) per record, the
 * CRC-32 (zlib's) of the record's UTF-8 tag, 1 for a tag whose CRC-32 is 0, and 0 for a record
 * without a tag: the `.tagindex` entries of the batch (adiskq/_sansio/tags.py is the reference and
 * says why the hash is what it is).
 *
 * The records are the producer's own, just encoded, so only their shape is checked here; anything
 * that is not a list of bytes whose tag fields fit makes it return NotImplemented (the reference then
 * raises its error). */
#include "core.h"

PyObject *adq_py_tag_column(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 1) {
        PyErr_SetString(PyExc_TypeError, "tag_column takes 1 argument");
        return NULL;
    }
    if (!PyList_CheckExact(args[0])) Py_RETURN_NOTIMPLEMENTED;
    Py_ssize_t count = PyList_GET_SIZE(args[0]);
    PyObject *column = PyBytes_FromStringAndSize(NULL, count * 4);
    if (column == NULL) return NULL;
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(column);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *record = PyList_GET_ITEM(args[0], i);
        if (!PyBytes_CheckExact(record)) goto not_plain;
        const uint8_t *at = (const uint8_t *)PyBytes_AS_STRING(record);
        size_t size = (size_t)PyBytes_GET_SIZE(record);
        uint32_t hash = 0;
        if (size < ADQ_MIN_RECORD_BYTES) goto not_plain;
        if (at[ADQ_ATTRIBUTES_AT] & ADQ_TAGGED) {
            uint64_t tag_at = ADQ_KEY_AT + (uint64_t)adq_load_u32(at + ADQ_KEY_LENGTH_AT);
            if (tag_at + 2 > size) goto not_plain;
            uint64_t tag_len = adq_load_u16(at + tag_at);
            if (tag_at + 2 + tag_len > size) goto not_plain;
            hash = adq_crc32(0, at + tag_at + 2, (size_t)tag_len);
            if (hash == 0) hash = 1;
        }
        adq_store_u32(out + 4 * i, hash);
    }
    return column;
not_plain:
    Py_DECREF(column);
    Py_RETURN_NOTIMPLEMENTED;
}

/* matching_entries(column, hashes) -> [entry numbers]: the entries of a .tagindex buffer (whole u32
 * entries; a partial one at the end is ignored) whose hash is one of `hashes` (a tuple of at most 8
 * ints below 2**32; NotImplemented for anything else), ascending. The filtering consumer's scan. */
PyObject *adq_py_matching_entries(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "matching_entries takes 2 arguments");
        return NULL;
    }
    if (!PyBytes_CheckExact(args[0]) || !PyTuple_CheckExact(args[1]) || PyTuple_GET_SIZE(args[1]) > 8)
        Py_RETURN_NOTIMPLEMENTED;
    uint32_t wanted[8];
    Py_ssize_t n = 0;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(args[1]); k++) {
        PyObject *item = PyTuple_GET_ITEM(args[1], k);
        if (!PyLong_CheckExact(item)) Py_RETURN_NOTIMPLEMENTED;
        unsigned long value = PyLong_AsUnsignedLong(item);
        if (PyErr_Occurred() || value > 0xFFFFFFFFul) {
            PyErr_Clear();
            Py_RETURN_NOTIMPLEMENTED;
        }
        wanted[n++] = (uint32_t)value;
    }
    const uint8_t *column = (const uint8_t *)PyBytes_AS_STRING(args[0]);
    Py_ssize_t count = PyBytes_GET_SIZE(args[0]) / 4;
    PyObject *found = PyList_New(0);
    if (found == NULL) return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        uint32_t value = adq_load_u32(column + 4 * i);
        for (Py_ssize_t k = 0; k < n; k++) {
            if (value == wanted[k]) {
                PyObject *number = PyLong_FromSsize_t(i);
                if (number == NULL || PyList_Append(found, number) < 0) {
                    Py_XDECREF(number);
                    Py_DECREF(found);
                    return NULL;
                }
                Py_DECREF(number);
                break;
            }
        }
    }
    return found;
}
