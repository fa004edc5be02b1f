/* The arguments of a Kafka request reader (kafka_fetch_request, kafka_produce_request), checked
 * alike; the reference: check_request_arguments in adiskq/kafka/wire/request_reader.py. */
#include "request_reader.h"

int kq_request_arguments(PyObject *const *args, Py_ssize_t nargs, const char *function, const char *name,
                         long min_version, long max_version, long flexible_from, kq_request_reader *reader,
                         long *version) {
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "%s(message, at, version) takes 3 arguments", function);
        return -1;
    }
    if (!PyBytes_Check(args[0])) {
        PyErr_Format(PyExc_TypeError, "%s: message is bytes", name);
        return -1;
    }
    if (!PyLong_Check(args[1]) || !PyLong_Check(args[2])) {
        PyErr_Format(PyExc_TypeError, "%s: at and version are ints", name);
        return -1;
    }
    Py_ssize_t size = PyBytes_GET_SIZE(args[0]);
    int overflow = 0;
    long long at = PyLong_AsLongLongAndOverflow(args[1], &overflow);
    if (at == -1 && PyErr_Occurred()) return -1;
    if (overflow || at < 0 || at > size) {
        PyErr_Format(PyExc_ValueError, "%s: at is within the message", name);
        return -1;
    }
    long long asked = PyLong_AsLongLongAndOverflow(args[2], &overflow);
    if (asked == -1 && PyErr_Occurred()) return -1;
    if (overflow || asked < min_version || asked > max_version) {
        PyErr_Format(PyExc_ValueError, "%s: version must be within [%ld, %ld]", name, min_version, max_version);
        return -1;
    }
    reader->buf = (const uint8_t *)PyBytes_AS_STRING(args[0]);
    reader->at = (size_t)at;
    reader->end = (size_t)size;
    reader->flexible = asked >= flexible_from;
    *version = (long)asked;
    return 0;
}
