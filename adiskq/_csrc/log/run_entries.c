/* An EncodedRun's entries, made numbered from offset 0 at position 0, placed where the run is
 * written: the reference's place_entries (adiskq/_sansio/run_entries.py, which has the format and
 * the checks). One function for every run: a Kafka Produce's batch (kafka/store.c) and push_many's
 * packed batch (log/pack.c).
 *
 * place_entries(data, index, timeindex, tagindex, first_offset, start) -> (index, timeindex)
 *     the run's .index entries (offset, position, size; u64 LE each) and .timeindex entries
 *     (offset, timestamp_ns) placed at first_offset and start: offset first_offset + i, position
 *     start + where the record begins in `data` (both made here, whatever the run's own numbering
 *     says), size and timestamp as the run has them. Checked against `data` as they are placed, only
 *     what the files take from the run: whole entries, as many in each column, each entry's size its
 *     record's own size field (the records back to back, filling `data`), `tagindex` either b"" (no
 *     record carries a tag) or one 4-byte entry a record, 0 exactly for the records without a tag,
 *     and no placed offset or position past 2**63 - 1. ValueError (the reference's message)
 *     otherwise, and nothing placed. */
#include "../core.h"

#define MAX_PLACED 0x7FFFFFFFFFFFFFFFull

static int u63_arg(PyObject *object, const char *name, uint64_t *value) {
    if (!PyLong_Check(object)) {
        PyErr_Format(PyExc_TypeError, "place_entries: %s is an int", name);
        return -1;
    }
    long long v = PyLong_AsLongLong(object);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v < 0) {
        PyErr_Format(PyExc_ValueError, "place_entries: %s must be within [0, 2**63 - 1]", name);
        return -1;
    }
    *value = (uint64_t)v;
    return 0;
}

static PyObject *bad_entries(const char *what) {
    PyErr_Format(PyExc_ValueError, "place_entries: %s", what);
    return NULL;
}

/* One pass over the run: each entry checked, then written placed; where the data ends, or *problem
 * set at the first wrong entry. Inlined twice, with and without a tag column (the test of `tags`
 * then leaves the loop). Each column walked by its own pointer and the offset, the placed position
 * and what is left of the data kept as they go: no index is multiplied into an address, and the
 * size check is one comparison. */
static inline __attribute__((always_inline)) uint64_t
place_all(const uint8_t *data, uint64_t data_length, const uint8_t *entry, const uint8_t *time_entry,
          const uint8_t *tag, uint64_t count, uint64_t first_offset, uint64_t start, uint8_t *out,
          uint8_t *time_out, const char **problem) {
    const uint8_t *record = data;
    uint64_t remaining = data_length, offset = first_offset, placed = start;
    const uint8_t *const end = entry + count * ADQ_INDEX_ENTRY_BYTES;
    for (; entry != end; entry += ADQ_INDEX_ENTRY_BYTES) {
        uint64_t size = adq_load_u64(entry + 16);
        if (size < ADQ_MIN_RECORD_BYTES || size > remaining || adq_load_u32(record + ADQ_SIZE_AT) != size) {
            *problem = "each record must be of the size its entry says, within the data";
            break;
        }
        int tagged = (record[ADQ_ATTRIBUTES_AT] & ADQ_TAGGED) != 0;
        if (tag == NULL ? tagged : tagged != (adq_load_u32(tag) != 0)) {
            *problem = "each record's tag entry must be 0 exactly when it carries no tag (no tagindex: no tags)";
            break;
        }
        adq_store_u64(out, offset);
        adq_store_u64(out + 8, placed);
        adq_store_u64(out + 16, size);
        adq_store_u64(time_out, offset);
        memcpy(time_out + 8, time_entry + 8, 8);
        offset++;
        placed += size;
        record += size;
        remaining -= size;
        time_entry += ADQ_TIMEINDEX_ENTRY_BYTES;
        out += ADQ_INDEX_ENTRY_BYTES;
        time_out += ADQ_TIMEINDEX_ENTRY_BYTES;
        if (tag != NULL) tag += ADQ_TAG_ENTRY_BYTES;
    }
    return data_length - remaining;
}

/* place_entries(data, index, timeindex, tagindex, first_offset, start) */
PyObject *adq_py_place_entries(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError,
                        "place_entries(data, index, timeindex, tagindex, first_offset, start) takes 6 arguments");
        return NULL;
    }
    if (!PyBytes_CheckExact(args[0]) || !PyBytes_CheckExact(args[1]) || !PyBytes_CheckExact(args[2]) ||
        !PyBytes_CheckExact(args[3])) {
        PyErr_SetString(PyExc_TypeError, "place_entries: data, index, timeindex and tagindex are bytes");
        return NULL;
    }
    uint64_t first_offset, start;
    if (u63_arg(args[4], "first_offset", &first_offset) < 0 || u63_arg(args[5], "start", &start) < 0) return NULL;
    const uint8_t *data = (const uint8_t *)PyBytes_AS_STRING(args[0]);
    uint64_t data_length = (uint64_t)PyBytes_GET_SIZE(args[0]);
    Py_ssize_t index_length = PyBytes_GET_SIZE(args[1]), time_length = PyBytes_GET_SIZE(args[2]);
    if (index_length % ADQ_INDEX_ENTRY_BYTES || time_length % ADQ_TIMEINDEX_ENTRY_BYTES ||
        index_length / ADQ_INDEX_ENTRY_BYTES != time_length / ADQ_TIMEINDEX_ENTRY_BYTES)
        return bad_entries("index and timeindex must hold whole entries, as many in each");
    uint64_t count = (uint64_t)(index_length / ADQ_INDEX_ENTRY_BYTES);
    Py_ssize_t tag_length = PyBytes_GET_SIZE(args[3]);
    if (tag_length != 0 && (uint64_t)tag_length != count * ADQ_TAG_ENTRY_BYTES)
        return bad_entries("tagindex must be empty or hold one entry a record");
    if ((count && first_offset > MAX_PLACED - (count - 1)) || start > MAX_PLACED - data_length)
        return bad_entries("the placed entries would pass 2**63 - 1");
    const uint8_t *index_in = (const uint8_t *)PyBytes_AS_STRING(args[1]);
    const uint8_t *time_in = (const uint8_t *)PyBytes_AS_STRING(args[2]);
    const uint8_t *tags = tag_length ? (const uint8_t *)PyBytes_AS_STRING(args[3]) : NULL;
    PyObject *index = PyBytes_FromStringAndSize(NULL, index_length);
    PyObject *timeindex = PyBytes_FromStringAndSize(NULL, time_length);
    if (index == NULL || timeindex == NULL) {
        Py_XDECREF(index);
        Py_XDECREF(timeindex);
        return NULL;
    }
    uint8_t *index_out = (uint8_t *)PyBytes_AS_STRING(index);
    uint8_t *time_out = (uint8_t *)PyBytes_AS_STRING(timeindex);
    const char *problem = NULL;
    uint64_t position = tags == NULL ? place_all(data, data_length, index_in, time_in, NULL, count, first_offset, start,
                                                 index_out, time_out, &problem)
                                     : place_all(data, data_length, index_in, time_in, tags, count, first_offset, start,
                                                 index_out, time_out, &problem);
    if (problem == NULL && position != data_length) problem = "the records must fill the data";
    if (problem != NULL) {
        Py_DECREF(index);
        Py_DECREF(timeindex);
        return bad_entries(problem);
    }
    return Py_BuildValue("(NN)", index, timeindex);
}
