/* The inline push's two writes in one call: a record to the end of .data, then its entry to the end of
 * .index (adiskq/_storage/segment_writer.py, SegmentWriter.append_one, is the caller and writes the same bytes
 * itself when the pure-Python core runs: append_record_reference there is this function's reference).
 *
 * The one function of the compiled core that does I/O. It exists because a push that goes inline
 * spends more in the interpreter than in its two system calls; everything else about the segment (its
 * buffered time, tag and key entries, its recovery when a write fails) stays in Python.
 *
 *   append_record(write, data_fd, index_fd, record, offset, position) -> None
 *
 * `write` is os.write as the caller looked it up. When it is the real one (posix.write), the writes are
 * write(2) calls made here, with the GIL released around the two (as os.write releases it around one);
 * when a test has put its own in its place (fault injection: tests/helpers/faults.py,
 * tests/helpers/syscalls.py), every write goes through that function instead, so injected errors,
 * short writes and crashes reach this code as they reach the Python path. A short write continues
 * with the rest; EINTR retries after running the signal handlers (PEP 475, as os.write does).
 *
 * The .index entry: u64 offset | u64 position (the record's first byte in .data) | u64 size, little-
 * endian (entries.py's INDEX_ENTRY, "<QQQ").
 *
 * On failure it raises what the failing write raised (an OSError; or what a signal handler raised
 * while a write was retried). When the record went in whole and its entry did not (or only partly),
 * the exception's `index_entry` attribute is True: the caller then cuts .index back as well as .data.
 * Nothing is cut back here.
 *
 *   append_one(write, data_fd, index_fd, record, offset, position,
 *              timestamp_ns, time_buffer, tag_entry, tag_buffer, key_hash, key_buffer) -> None
 *
 * append_record, and once both writes are made, the record's buffered entries noted as
 * SegmentWriter.append_one notes them (_storage/append.py's append_one_reference is this function's reference):
 * its .timeindex entry (u64 offset | i64 timestamp_ns, little-endian: entries.py's TIMEINDEX_ENTRY, "<Qq")
 * appended to the list time_buffer, tag_entry (the 4 bytes of its .tagindex entry) to the list
 * tag_buffer, and key_hash (its key index entry, a u32) to the list key_buffer unless that is None.
 * Every argument is checked (TypeError for a wrong type; ValueError for a tag entry of another size;
 * OverflowError for a key hash, offset, position or timestamp out of its field's range) before the first
 * write, so a call that raises before writing leaves the files and the lists as they were. On a failed
 * write the lists are left as they were and the error is append_record's. A single push's append in one
 * call from Python.
 */
#include "../core.h"

#include <errno.h>
#include <limits.h>
#include <unistd.h>

static PyObject *real_write = NULL; /* posix.write: os.write when no test has replaced it */

/* One write of the call: what is left of buf[0:size] for fd. */
struct pending_write {
    int fd;
    PyObject *fd_object;
    const char *buf;
    Py_ssize_t size;
    Py_ssize_t done;
};

/* The rest of one write through a replaced os.write; -1 with an exception set on failure. */
static int write_through(PyObject *write_function, struct pending_write *w) {
    while (w->done < w->size) {
        PyObject *chunk = PyBytes_FromStringAndSize(w->buf + w->done, w->size - w->done);
        if (chunk == NULL) return -1;
        PyObject *args[2] = {w->fd_object, chunk};
        PyObject *result = PyObject_Vectorcall(write_function, args, 2, NULL);
        Py_DECREF(chunk);
        if (result == NULL) return -1;
        Py_ssize_t written = PyLong_AsSsize_t(result);
        Py_DECREF(result);
        if (written == -1 && PyErr_Occurred()) return -1;
        if (written < 0 || written > w->size - w->done) {
            PyErr_SetString(PyExc_ValueError, "append_record: write() returned an impossible byte count");
            return -1;
        }
        w->done += written;
    }
    return 0;
}

/* Make the writes in order, every byte of each; returns -1 when all are made, or the number of the
 * one that failed, with its exception set. By write(2) itself, the writes share one release of the
 * GIL (a release and re-take cost about a third of a microsecond): it is taken back only to raise,
 * or on EINTR to run the signal handlers (an exception from one fails the write, as in os.write). */
static int make_writes(PyObject *write_function, struct pending_write *writes, int count) {
    if (write_function != real_write) {
        for (int i = 0; i < count; i++) {
            if (write_through(write_function, &writes[i]) < 0) return i;
        }
        return -1;
    }
    for (;;) {
        int failed = -1, error = 0;
        Py_BEGIN_ALLOW_THREADS
        for (int i = 0; i < count && failed < 0; i++) {
            while (writes[i].done < writes[i].size) {
                ssize_t written = write(writes[i].fd, writes[i].buf + writes[i].done,
                                        (size_t)(writes[i].size - writes[i].done));
                if (written <= 0) { /* 0: not for a regular file; treated as EINTR, so it stays interruptible */
                    failed = i;
                    error = written < 0 ? errno : EINTR;
                    break;
                }
                writes[i].done += written;
            }
        }
        Py_END_ALLOW_THREADS
        if (failed < 0) return -1;
        if (error == EINTR) {
            if (PyErr_CheckSignals() < 0) return failed;
            continue;
        }
        errno = error;
        PyErr_SetFromErrno(PyExc_OSError);
        return failed;
    }
}

/* A file descriptor argument, or -1 with an exception set. */
static int fd_of(PyObject *object) {
    long fd = PyLong_AsLong(object);
    if (fd == -1 && PyErr_Occurred()) return -1;
    if (fd < 0 || fd > INT_MAX) {
        PyErr_SetString(PyExc_ValueError, "append_record: a file descriptor is out of range");
        return -1;
    }
    return (int)fd;
}

static int load_real_write(void) {
    if (real_write != NULL) return 0;
    PyObject *posix = PyImport_ImportModule("posix");
    if (posix == NULL) return -1;
    real_write = PyObject_GetAttrString(posix, "write");
    Py_DECREF(posix);
    return real_write == NULL ? -1 : 0;
}

/* The two writes of append_record's arguments (args[0:6], checked but for the record's type); 0 when
 * made, -1 with the exception set (marked with index_entry when the record went in whole). */
static int append_checked(PyObject *const *args) {
    if (load_real_write() < 0) return -1;
    int data_fd = fd_of(args[1]);
    if (data_fd < 0) return -1;
    int index_fd = fd_of(args[2]);
    if (index_fd < 0) return -1;
    unsigned long long offset = PyLong_AsUnsignedLongLong(args[4]);
    if (offset == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    unsigned long long position = PyLong_AsUnsignedLongLong(args[5]);
    if (position == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    PyObject *record = args[3];
    Py_ssize_t size = PyBytes_GET_SIZE(record);

    uint8_t entry[ADQ_INDEX_ENTRY_BYTES];
    adq_store_u64(entry, offset);
    adq_store_u64(entry + 8, position);
    adq_store_u64(entry + 16, (uint64_t)size);

    struct pending_write writes[2] = {
        {data_fd, args[1], PyBytes_AS_STRING(record), size, 0},
        {index_fd, args[2], (const char *)entry, ADQ_INDEX_ENTRY_BYTES, 0},
    };
    int failed = make_writes(args[0], writes, 2);
    if (failed == 0) return -1;
    if (failed == 1) {
        /* Marked whatever the exception (an OSError, or a KeyboardInterrupt a signal handler raised
         * while a write was retried): the caller cuts back on any. */
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        PyErr_NormalizeException(&type, &value, &traceback);
        if (value != NULL && PyObject_SetAttrString(value, "index_entry", Py_True) < 0) PyErr_Clear();
        PyErr_Restore(type, value, traceback);
        return -1;
    }
    return 0;
}

PyObject *adq_py_append_record(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 6 || !PyBytes_CheckExact(args[3])) {
        PyErr_SetString(PyExc_TypeError, "append_record(write, data_fd, index_fd, record: bytes, offset, position)");
        return NULL;
    }
    if (append_checked(args) < 0) return NULL;
    Py_RETURN_NONE;
}

PyObject *adq_py_append_one(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 12 || !PyBytes_CheckExact(args[3]) || !PyLong_Check(args[4]) || !PyLong_Check(args[5]) ||
        !PyLong_Check(args[6]) || !PyList_CheckExact(args[7]) || !PyBytes_CheckExact(args[8]) ||
        !PyList_CheckExact(args[9]) || !PyLong_CheckExact(args[10]) ||
        (args[11] != Py_None && !PyList_CheckExact(args[11]))) {
        PyErr_SetString(PyExc_TypeError,
                        "append_one(write, data_fd, index_fd, record: bytes, offset: int, position: int, "
                        "timestamp_ns: int, time_buffer: list, tag_entry: bytes, tag_buffer: list, key_hash: int, "
                        "key_buffer: list | None)");
        return NULL;
    }
    if (PyBytes_GET_SIZE(args[8]) != ADQ_TAG_ENTRY_BYTES) {
        PyErr_SetString(PyExc_ValueError, "append_one: a .tagindex entry is 4 bytes");
        return NULL;
    }
    unsigned long long key_hash = PyLong_AsUnsignedLongLong(args[10]);
    if ((key_hash == (unsigned long long)-1 && PyErr_Occurred()) || key_hash > 0xFFFFFFFFull) {
        PyErr_Clear();
        PyErr_SetString(PyExc_OverflowError, "append_one: a key index entry is a u32");
        return NULL;
    }
    unsigned long long offset = PyLong_AsUnsignedLongLong(args[4]);
    if (offset == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    if (PyLong_AsUnsignedLongLong(args[5]) == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    long long timestamp_ns = PyLong_AsLongLong(args[6]);
    if (timestamp_ns == -1 && PyErr_Occurred()) return NULL;
    PyObject *time_entry = PyBytes_FromStringAndSize(NULL, ADQ_TIMEINDEX_ENTRY_BYTES);
    if (time_entry == NULL) return NULL;
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(time_entry);
    adq_store_u64(out, offset);
    adq_store_u64(out + 8, (uint64_t)timestamp_ns);
    if (append_checked(args) < 0) {
        Py_DECREF(time_entry);
        return NULL;
    }
    /* Written: the entries are noted in the order the reference notes them. */
    int noted = PyList_Append(args[7], time_entry);
    Py_DECREF(time_entry);
    if (noted < 0 || PyList_Append(args[9], args[8]) < 0) return NULL;
    if (args[11] != Py_None && PyList_Append(args[11], args[10]) < 0) return NULL;
    Py_RETURN_NONE;
}
