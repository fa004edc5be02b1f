/* A run of stored records' index entries, made numbered from offset 0 at position 0, placed where the
 * run is written: the reference's place_run_entries (adiskq/_sansio/run_entries.py, which has the
 * format and the checks).
 *
 * place_run_entries(data, index, timeindex, first_offset, start) -> (index, timeindex)
 *     the run's .index entries (offset, position, size; u64 LE each) and .timeindex entries
 *     (offset, timestamp_ns) with first_offset added to every offset and start to every position.
 *     The entries are checked against `data` first, since the files take them as they are: whole
 *     entries, as many in each column, numbered 0, 1, 2 ... in both, each record starting where the
 *     one before it ends (the first at 0, the last ending where data ends), each entry's size its
 *     record's own size field, no record tagged (a run's .tagindex is all "no tag"), and no placed
 *     offset or position past 2**63 - 1. ValueError (the reference's message) otherwise. */
#include "../core.h"

#define MAX_PLACED 0x7FFFFFFFFFFFFFFFull

static int u63_arg(PyObject *object, const char *name, uint64_t *value) {
    if (!PyLong_Check(object)) {
        PyErr_Format(PyExc_TypeError, "place_run_entries: %s is an int", name);
        return -1;
    }
    long long v = PyLong_AsLongLong(object);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v < 0) {
        PyErr_Format(PyExc_ValueError, "place_run_entries: %s must be within [0, 2**63 - 1]", name);
        return -1;
    }
    *value = (uint64_t)v;
    return 0;
}

static PyObject *bad_entries(const char *what) {
    PyErr_Format(PyExc_ValueError, "place_run_entries: %s", what);
    return NULL;
}

/* place_run_entries(data, index, timeindex, first_offset, start) */
PyObject *adq_py_place_run_entries(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError,
                        "place_run_entries(data, index, timeindex, first_offset, start) takes 5 arguments");
        return NULL;
    }
    if (!PyBytes_CheckExact(args[0]) || !PyBytes_CheckExact(args[1]) || !PyBytes_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError, "place_run_entries: data, index and timeindex are bytes");
        return NULL;
    }
    uint64_t first_offset, start;
    if (u63_arg(args[3], "first_offset", &first_offset) < 0 || u63_arg(args[4], "start", &start) < 0) return NULL;
    const uint8_t *data = (const uint8_t *)PyBytes_AS_STRING(args[0]);
    uint64_t data_length = (uint64_t)PyBytes_GET_SIZE(args[0]);
    Py_ssize_t index_length = PyBytes_GET_SIZE(args[1]), time_length = PyBytes_GET_SIZE(args[2]);
    if (index_length % ADQ_INDEX_ENTRY_BYTES || time_length % ADQ_TIMEINDEX_ENTRY_BYTES ||
        index_length / ADQ_INDEX_ENTRY_BYTES != time_length / ADQ_TIMEINDEX_ENTRY_BYTES)
        return bad_entries("index and timeindex must hold whole entries, as many in each");
    uint64_t count = (uint64_t)(index_length / ADQ_INDEX_ENTRY_BYTES);
    if ((count && first_offset > MAX_PLACED - (count - 1)) || start > MAX_PLACED - data_length)
        return bad_entries("the placed entries would pass 2**63 - 1");
    const uint8_t *index_in = (const uint8_t *)PyBytes_AS_STRING(args[1]);
    const uint8_t *time_in = (const uint8_t *)PyBytes_AS_STRING(args[2]);
    uint64_t position = 0;
    for (uint64_t i = 0; i < count; i++) {
        const uint8_t *entry = index_in + i * ADQ_INDEX_ENTRY_BYTES;
        uint64_t size = adq_load_u64(entry + 16);
        if (adq_load_u64(entry) != i || adq_load_u64(time_in + i * ADQ_TIMEINDEX_ENTRY_BYTES) != i)
            return bad_entries("the entries must be numbered 0, 1, 2 ... in both columns");
        if (adq_load_u64(entry + 8) != position || size < ADQ_MIN_RECORD_BYTES || size > data_length - position ||
            adq_load_u32(data + position + ADQ_SIZE_AT) != size)
            return bad_entries("each record must start where the one before it ends, of the size its entry says");
        if (data[position + ADQ_ATTRIBUTES_AT] & ADQ_TAGGED) return bad_entries("the records of a run carry no tag");
        position += size;
    }
    if (position != data_length) return bad_entries("the records must fill the data");
    PyObject *index = PyBytes_FromStringAndSize(NULL, index_length);
    PyObject *timeindex = PyBytes_FromStringAndSize(NULL, time_length);
    if (index == NULL || timeindex == NULL) {
        Py_XDECREF(index);
        Py_XDECREF(timeindex);
        return NULL;
    }
    uint8_t *index_out = (uint8_t *)PyBytes_AS_STRING(index);
    uint8_t *time_out = (uint8_t *)PyBytes_AS_STRING(timeindex);
    for (uint64_t i = 0; i < count; i++) {
        const uint8_t *entry = index_in + i * ADQ_INDEX_ENTRY_BYTES;
        uint8_t *out = index_out + i * ADQ_INDEX_ENTRY_BYTES;
        adq_store_u64(out, first_offset + i);
        adq_store_u64(out + 8, start + adq_load_u64(entry + 8));
        memcpy(out + 16, entry + 16, 8);
        adq_store_u64(time_out + i * ADQ_TIMEINDEX_ENTRY_BYTES, first_offset + i);
        memcpy(time_out + i * ADQ_TIMEINDEX_ENTRY_BYTES + 8, time_in + i * ADQ_TIMEINDEX_ENTRY_BYTES + 8, 8);
    }
    return Py_BuildValue("(NN)", index, timeindex);
}
