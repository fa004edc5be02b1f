/* The tag column of a batch: tag_column(records) -> bytes, one u32 (little-endian) per record, the
 * CRC-32 (zlib's) of the record's UTF-8 tag, 1 for a tag whose CRC-32 is 0, and 0 for a record
 * without a tag: the `.tagindex` entries of the batch (adiskq/_sansio/tags.py is the reference and
 * says why the hash is what it is).
 *
 * The records are the producer's own, just encoded, so only their shape is checked here; anything
 * that is not a list of bytes whose tag fields fit makes it return NotImplemented (the reference then
 * raises its error). */
#include "../core.h"

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

/* The wanted hashes of a filtering read into `wanted`: their number, or -1 when `hashes` (a tuple the
 * caller checked holds at most 8 items) has anything but ints below 2**32 (the caller then answers
 * NotImplemented, and the reference handles it). */
static Py_ssize_t wanted_hashes(PyObject *hashes, uint32_t wanted[8]) {
    Py_ssize_t n = 0;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(hashes); k++) {
        PyObject *item = PyTuple_GET_ITEM(hashes, k);
        if (!PyLong_CheckExact(item)) return -1;
        unsigned long value = PyLong_AsUnsignedLong(item);
        if (PyErr_Occurred() || value > 0xFFFFFFFFul) {
            PyErr_Clear();
            return -1;
        }
        wanted[n++] = (uint32_t)value;
    }
    return n;
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
    Py_ssize_t n = wanted_hashes(args[1], wanted);
    if (n < 0) Py_RETURN_NOTIMPLEMENTED;
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

/* The first entry from `i` on (below `covered`) whose hash is one of the n `wanted`; `covered` if none.
 * One or two wanted hashes (the common subscription: one tag, and the damaged records' UNKNOWN_TAG
 * that every filter wants, tags.py) get loops of their own: a load and a compare or two an entry. */
static Py_ssize_t next_match(const uint8_t *column, Py_ssize_t i, Py_ssize_t covered, const uint32_t *wanted,
                             Py_ssize_t n) {
    if (n == 1) {
        const uint32_t only = wanted[0];
        while (i < covered && adq_load_u32(column + 4 * i) != only) i++;
        return i;
    }
    if (n == 2) {
        const uint32_t first = wanted[0], second = wanted[1];
        for (; i < covered; i++) {
            uint32_t value = adq_load_u32(column + 4 * i);
            if (value == first || value == second) return i;
        }
        return i;
    }
    for (; i < covered; i++) {
        uint32_t value = adq_load_u32(column + 4 * i);
        for (Py_ssize_t k = 0; k < n; k++)
            if (value == wanted[k]) return i;
    }
    return covered;
}

static PyObject *not_plain(void) { Py_RETURN_NOTIMPLEMENTED; }

/* Append a Python int to a list; -1 on failure. */
static int append_size(PyObject *list, unsigned long long value) {
    PyObject *number = PyLong_FromUnsignedLongLong(value);
    if (number == NULL) return -1;
    int failed = PyList_Append(list, number);
    Py_DECREF(number);
    return failed;
}

/* matching_records(column, entries, hashes, first_offset, max_count, max_bytes)
 *   -> (positions, sizes, offsets, passed, total) | int
 *
 * The filtering consumer's selection, one call a read: `entries` holds the .index entries (u64
 * offset, u64 position, u64 size) of `count` messages from `first_offset` on, `column` their .tagindex
 * entries (possibly fewer: the entries past its end are all candidates, their tags unknown here).
 * The candidates are taken in order up to `max_count` of them, or until their sizes reach
 * `max_bytes` (-1: no limit); `offsets` are theirs, and `positions`/`sizes` the spans of .data that
 * hold them, candidates whose records touch in .data merged into one span (one pread). `passed` is
 * how many of the entries that looked at (all of them unless a limit stopped it), `total` the bytes
 * of the spans. An int instead: the entry number whose offset is not the one expected (the caller
 * raises its CorruptRecordError). adiskq/_sansio/tags.py's matching_records is the reference.
 *
 * Sizes and positions come from the .index file, which may be damaged: a sum of them that does not
 * fit in 64 bits (and offsets past 2**64 - 1) is NotImplemented, so the reference, whose ints do not
 * wrap, answers for that input too. */
PyObject *adq_py_matching_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "matching_records takes 6 arguments");
        return NULL;
    }
    if (!PyBytes_CheckExact(args[0]) || !PyTuple_CheckExact(args[2]) || PyTuple_GET_SIZE(args[2]) > 8 ||
        !PyLong_CheckExact(args[3]) || !PyLong_CheckExact(args[4]) || !PyLong_CheckExact(args[5]))
        Py_RETURN_NOTIMPLEMENTED;
    uint32_t wanted[8];
    Py_ssize_t n = wanted_hashes(args[2], wanted);
    if (n < 0) Py_RETURN_NOTIMPLEMENTED;
    unsigned long long first_offset = PyLong_AsUnsignedLongLong(args[3]);
    long long max_count = PyLong_AsLongLong(args[4]);
    long long max_bytes = PyLong_AsLongLong(args[5]);
    if (PyErr_Occurred() || max_count < 1 || max_bytes < -1) {
        PyErr_Clear();
        Py_RETURN_NOTIMPLEMENTED;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        Py_RETURN_NOTIMPLEMENTED;
    }
    const uint8_t *column = (const uint8_t *)PyBytes_AS_STRING(args[0]);
    Py_ssize_t covered = PyBytes_GET_SIZE(args[0]) / ADQ_TAG_ENTRY_BYTES;
    const uint8_t *entries = (const uint8_t *)view.buf;
    Py_ssize_t count = view.len / ADQ_INDEX_ENTRY_BYTES;
    if (count > 0 && first_offset > UINT64_MAX - (unsigned long long)(count - 1)) {
        PyBuffer_Release(&view);
        Py_RETURN_NOTIMPLEMENTED; /* the offsets of the last entries pass 2**64 - 1 */
    }
    PyObject *positions = PyList_New(0), *sizes = PyList_New(0), *offsets = PyList_New(0);
    PyObject *result = NULL;
    if (positions == NULL || sizes == NULL || offsets == NULL) goto done;
    long long taken = 0;
    unsigned long long size_read = 0, run_start = 0, run_end = 0;
    int in_run = 0;
    Py_ssize_t passed = count;
    if (covered > count) covered = count;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (i < covered) {
            i = next_match(column, i, covered, wanted, n);
            if (i == covered && covered < count) {
                /* past the column: every entry is a candidate */
            } else if (i >= covered) {
                break;
            }
        }
        const uint8_t *entry = entries + ADQ_INDEX_ENTRY_BYTES * i;
        if (adq_load_u64(entry) != first_offset + (unsigned long long)i) {
            result = PyLong_FromSsize_t(i);
            goto done;
        }
        unsigned long long position = adq_load_u64(entry + 8), size = adq_load_u64(entry + 16);
        /* run_end is position + size either way (merged, or a new span), and size_read grows by size. */
        if (size > UINT64_MAX - position || size > UINT64_MAX - size_read) {
            result = not_plain();
            goto done;
        }
        if (append_size(offsets, first_offset + (unsigned long long)i) < 0) goto done;
        if (in_run && position == run_end) {
            run_end += size;
        } else {
            if (in_run && (append_size(positions, run_start) < 0 || append_size(sizes, run_end - run_start) < 0))
                goto done;
            run_start = position;
            run_end = position + size;
            in_run = 1;
        }
        taken++;
        size_read += size;
        if (taken >= max_count || (max_bytes >= 0 && size_read >= (unsigned long long)max_bytes)) {
            passed = i + 1;
            break;
        }
    }
    if (in_run && (append_size(positions, run_start) < 0 || append_size(sizes, run_end - run_start) < 0)) goto done;
    result = Py_BuildValue("(OOOnK)", positions, sizes, offsets, passed, size_read);
done:
    PyBuffer_Release(&view);
    Py_XDECREF(positions);
    Py_XDECREF(sizes);
    Py_XDECREF(offsets);
    return result;
}
