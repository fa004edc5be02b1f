/* adiskq.Record's constructor in C. Record is a NamedTuple (value, key=None, headers=None,
 * timestamp=None, tag=None); the __new__ NamedTuple generates is a Python function, which costs more than
 * push_many's whole per-record work. adiskq/_sansio/values.py installs this one in its place when
 * the compiled core runs: the same arguments, defaults and errors, one C call. */
#include "core.h"

#define FIELDS 5
static const char *const field_names[FIELDS] = {"value", "key", "headers", "timestamp", "tag"};

/* Whether a Record of these fields can never be part of a reference cycle: values and keys that are
 * bytes or str, no headers (a dict a user may change), a timestamp that is None or an int, and a tag
 * that is None or a str. Such Records are untracked, as CPython untracks plain tuples of atoms (it
 * never does for a tuple subclass): the cyclic GC then never walks the thousands a push_many batch is
 * built of. */
static int cannot_form_cycles(PyObject *const fields[FIELDS]) {
    for (int f = 0; f < 2; f++)
        if (fields[f] != Py_None && !PyBytes_CheckExact(fields[f]) && !PyUnicode_CheckExact(fields[f])) return 0;
    return fields[2] == Py_None && (fields[3] == Py_None || PyLong_CheckExact(fields[3])) &&
           (fields[4] == Py_None || PyUnicode_CheckExact(fields[4]));
}

/* A Record of cls from the fields in args[0:positional] and the keywords named by kwnames, whose
 * values follow them in args. */
static PyObject *new_record(PyTypeObject *cls, PyObject *const *args, Py_ssize_t positional, PyObject *kwnames) {
    PyObject *fields[FIELDS] = {NULL, Py_None, Py_None, Py_None, Py_None};
    int given[FIELDS] = {0, 0, 0, 0, 0};
    if (positional > FIELDS) {
        PyErr_Format(PyExc_TypeError, "Record() takes from 1 to 5 positional arguments but %zd were given", positional);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < positional; i++) {
        fields[i] = args[i];
        given[i] = 1;
    }
    Py_ssize_t keywords = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < keywords; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        int found = -1;
        for (int f = 0; f < FIELDS; f++) {
            if (PyUnicode_CompareWithASCIIString(name, field_names[f]) == 0) {
                found = f;
                break;
            }
        }
        if (found < 0) {
            PyErr_Format(PyExc_TypeError, "Record() got an unexpected keyword argument '%U'", name);
            return NULL;
        }
        if (given[found]) {
            PyErr_Format(PyExc_TypeError, "Record() got multiple values for argument '%s'", field_names[found]);
            return NULL;
        }
        fields[found] = args[positional + k];
        given[found] = 1;
    }
    if (!given[0]) {
        PyErr_SetString(PyExc_TypeError, "Record() missing 1 required positional argument: 'value'");
        return NULL;
    }
    PyObject *record = cls->tp_alloc(cls, FIELDS);
    if (record == NULL) return NULL;
    for (int f = 0; f < FIELDS; f++) PyTuple_SET_ITEM(record, f, Py_NewRef(fields[f]));
    if (cannot_form_cycles(fields)) PyObject_GC_UnTrack(record);
    return record;
}

/* record_new(cls, value, key=None, headers=None, timestamp=None, tag=None): Record.__new__ */
PyObject *adq_py_record_new(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    (void)module;
    if (nargs < 1 || !PyType_Check(args[0]) || !PyType_IsSubtype((PyTypeObject *)args[0], &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "Record.__new__(cls, ...): cls is a Record type");
        return NULL;
    }
    return new_record((PyTypeObject *)args[0], args + 1, nargs - 1, kwnames);
}

/* Calling Record itself: without this, Record(value, key) goes through type.__call__, which packs the
 * arguments into a tuple and a dict, finds __new__ (record_new) by name, calls it, then looks for an
 * __init__ to run: three times the cost of building the Record. A type's tp_vectorcall is never
 * inherited, so a subclass of Record keeps the ordinary path (its own __new__ and __init__ run). */
static PyObject *record_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    return new_record((PyTypeObject *)callable, args, PyVectorcall_NARGS(nargsf), kwnames);
}

/* install_record_call(Record): Record(...) calls record_vectorcall. */
PyObject *adq_py_install_record_call(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 1 || !PyType_Check(args[0]) || !PyType_IsSubtype((PyTypeObject *)args[0], &PyTuple_Type) ||
        !(((PyTypeObject *)args[0])->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
        PyErr_SetString(PyExc_TypeError, "install_record_call(Record): Record is a NamedTuple class");
        return NULL;
    }
    ((PyTypeObject *)args[0])->tp_vectorcall = record_vectorcall;
    Py_RETURN_NONE;
}
