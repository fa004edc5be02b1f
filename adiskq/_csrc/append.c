/* The inline push's two writes in one call: a record to the end of .data, then its entry to the end of
 * .index (adiskq/_storage/segment.py, SegmentWriter.append_one, is the caller and writes the same bytes
 * itself when the pure-Python core runs: append_record_reference there is this function's reference).
 *
 * The one function of the compiled core that does I/O. It exists because a push that goes inline
 * spends more in the interpreter than in its two system calls; everything else about the segment (its
 * buffered time, tag and key entries, its recovery when a write fails) stays in Python.
 *
 *   append_record(write, data_fd, index_fd, record, offset, position) -> None
 *
 * `write` is os.write as the caller looked it up. When it is the real one (posix.write), the writes are
 * write(2) calls made here, each with the GIL released as os.write releases it; when a test has put its
 * own in its place (fault injection: tests/helpers/faults.py, tests/helpers/syscalls.py), every write
 * goes through that function instead, so injected errors, short writes and crashes reach this code as
 * they reach the Python path. A short write continues with the rest; EINTR retries after running the
 * signal handlers (PEP 475, as os.write does).
 *
 * The .index entry: u64 offset | u64 position (the record's first byte in .data) | u64 size, little-
 * endian (segment.py's INDEX_ENTRY, "<QQQ").
 *
 * On failure it raises what the failing write raised (an OSError; or what a signal handler raised
 * while a write was retried). When the record went in whole and its entry did not (or only partly),
 * the exception's `index_entry` attribute is True: the caller then cuts .index back as well as .data.
 * Nothing is cut back here.
 */
#include "core.h"

#include <errno.h>
#include <limits.h>
#include <unistd.h>

#define INDEX_ENTRY_BYTES 24

static PyObject *real_write = NULL; /* posix.write: os.write when no test has replaced it */

/* Write every byte of buf[0:size] to fd, through `write` when it is not the real one; -1 with an
 * exception set on failure. */
static int write_all(PyObject *write_function, int fd, PyObject *fd_object, const char *buf, Py_ssize_t size) {
    Py_ssize_t done = 0;
    while (done < size) {
        Py_ssize_t written;
        if (write_function == real_write) {
            Py_BEGIN_ALLOW_THREADS
            written = (Py_ssize_t)write(fd, buf + done, (size_t)(size - done));
            Py_END_ALLOW_THREADS
            if (written < 0) {
                if (errno == EINTR) {
                    if (PyErr_CheckSignals() < 0) return -1;
                    continue;
                }
                PyErr_SetFromErrno(PyExc_OSError);
                return -1;
            }
        } else {
            PyObject *chunk = PyBytes_FromStringAndSize(buf + done, size - done);
            if (chunk == NULL) return -1;
            PyObject *args[2] = {fd_object, chunk};
            PyObject *result = PyObject_Vectorcall(write_function, args, 2, NULL);
            Py_DECREF(chunk);
            if (result == NULL) return -1;
            written = PyLong_AsSsize_t(result);
            Py_DECREF(result);
            if (written == -1 && PyErr_Occurred()) return -1;
            if (written < 0 || written > size - done) {
                PyErr_SetString(PyExc_ValueError, "append_record: write() returned an impossible byte count");
                return -1;
            }
        }
        done += written;
    }
    return 0;
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

PyObject *adq_py_append_record(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 6 || !PyBytes_CheckExact(args[3])) {
        PyErr_SetString(PyExc_TypeError, "append_record(write, data_fd, index_fd, record: bytes, offset, position)");
        return NULL;
    }
    if (load_real_write() < 0) return NULL;
    int data_fd = fd_of(args[1]);
    if (data_fd < 0) return NULL;
    int index_fd = fd_of(args[2]);
    if (index_fd < 0) return NULL;
    unsigned long long offset = PyLong_AsUnsignedLongLong(args[4]);
    if (offset == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    unsigned long long position = PyLong_AsUnsignedLongLong(args[5]);
    if (position == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    PyObject *record = args[3];
    Py_ssize_t size = PyBytes_GET_SIZE(record);

    uint8_t entry[INDEX_ENTRY_BYTES];
    adq_store_u64(entry, offset);
    adq_store_u64(entry + 8, position);
    adq_store_u64(entry + 16, (uint64_t)size);

    if (write_all(args[0], data_fd, args[1], PyBytes_AS_STRING(record), size) < 0) return NULL;
    if (write_all(args[0], index_fd, args[2], (const char *)entry, INDEX_ENTRY_BYTES) < 0) {
        /* Marked whatever the exception (an OSError, or a KeyboardInterrupt a signal handler raised
         * while a write was retried): the caller cuts back on any. */
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        PyErr_NormalizeException(&type, &value, &traceback);
        if (value != NULL && PyObject_SetAttrString(value, "index_entry", Py_True) < 0) PyErr_Clear();
        PyErr_Restore(type, value, traceback);
        return NULL;
    }
    Py_RETURN_NONE;
}
