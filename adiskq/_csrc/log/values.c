/* adiskq.Record's constructor in C. Record is a NamedTuple (value, key=None, headers=None,
 * timestamp=None, tag=None); the __new__ NamedTuple generates is a Python function, which costs more than
 * push_many's whole per-record work. adiskq/_sansio/values.py installs this one in its place when
 * the compiled core runs: the same arguments, defaults and errors, one C call.
 *
 * Records that can never be part of a reference cycle (see cannot_form_cycles) are made untracked and
 * kept on a free list when freed, as log/values_receipt.c keeps Receipts: a caller builds a push_many batch of
 * Records, and drops them all when the call returns, so the next batch reuses their tuples. Through
 * CPython's own paths each Record was an allocation that zeroes it and counts towards the cyclic GC's
 * young generation (a tuple subclass gets no tuple free list), and a free through subtype_dealloc and
 * tuple's dealloc: together more than the rest of push_many's work a record. The list is process-wide
 * and bounded (FREE_RECORDS tuples of five slots, 88 bytes each with the GC header, about 176 KiB at
 * most); only exact Records of the type install_record_call() was given, untracked when freed, go on
 * it. Builds that count or trace references, and the free-threaded build, keep none. Under
 * AddressSanitizer a Record on the free list is poisoned, so a use after free is still caught. */
#include "../core.h"

#define FIELDS 5
static const char *const field_names[FIELDS] = {"value", "key", "headers", "timestamp", "tag"};

#if defined(Py_REF_DEBUG) || defined(Py_TRACE_REFS) || defined(Py_GIL_DISABLED)
#define FREE_RECORDS 0
#else
#define FREE_RECORDS 2048 /* a push_many batch of up to 2,048 Records reuses the one before's */
#endif

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(op) ASAN_POISON_MEMORY_REGION((op), Py_TYPE(op)->tp_basicsize + FIELDS * sizeof(PyObject *))
#define UNPOISON(op, type) ASAN_UNPOISON_MEMORY_REGION((op), (type)->tp_basicsize + FIELDS * sizeof(PyObject *))
#else
#define POISON(op) ((void)0)
#define UNPOISON(op, type) ((void)0)
#endif

/* The Record type install_record_call() was given (a strong reference; NULL when it is not laid out
 * as a NamedTuple is): the one whose instances are made untracked here and kept on the free list. */
static PyTypeObject *listed_type = NULL;
#if FREE_RECORDS
static PyObject *free_records[FREE_RECORDS];
static int free_count = 0;
#endif

/* An untracked Record of listed_type whose FIELDS slots the caller fills: one from the free list, or
 * allocated without zeroing (every slot is set at once). */
static PyObject *untracked_record(void) {
#if FREE_RECORDS
    if (free_count > 0) {
        PyObject *record = free_records[--free_count];
        UNPOISON(record, listed_type);
        Py_SET_REFCNT(record, 1); /* it kept its type's reference and its size while on the list */
#if PY_VERSION_HEX >= 0x030E0000
        ((PyTupleObject *)record)->ob_hash = -1; /* 3.14 caches a tuple's hash: not the last one's */
#endif
        return record;
    }
#endif
    PyObject *record = (PyObject *)PyObject_GC_NewVar(PyTupleObject, listed_type, FIELDS);
#if PY_VERSION_HEX >= 0x030E0000
    if (record != NULL) ((PyTupleObject *)record)->ob_hash = -1;
#endif
    return record;
}

/* The Record type's tp_dealloc (installed by install_record_call when the type is laid out as a
 * NamedTuple is). As log/values_receipt.c's, it also runs for the tuple part of a subclass's instance, and then
 * does what tuple's dealloc would, plus the release of the instance's reference to its heap type. */
static void record_dealloc(PyObject *self) {
#if FREE_RECORDS
    PyTypeObject *type = Py_TYPE(self);
    PyObject **items = ((PyTupleObject *)self)->ob_item;
    if (type == listed_type && Py_SIZE(self) == FIELDS && !PyObject_GC_IsTracked(self)) {
        for (int f = 0; f < FIELDS; f++) Py_CLEAR(items[f]);
        /* Counted after the decrefs: one may have run a __del__ that freed other Records. */
        if (free_count < FREE_RECORDS) {
            free_records[free_count++] = self;
            POISON(self);
        } else {
            type->tp_free(self);
            Py_DECREF(type);
        }
        return;
    }
#endif
    adq_named_tuple_free(self, record_dealloc);
}

/* Free the Records on the free list (before another type becomes the listed one). */
static void drain(void) {
#if FREE_RECORDS
    while (free_count > 0) {
        PyObject *record = free_records[--free_count];
        UNPOISON(record, listed_type); /* the only type on the list */
        PyTypeObject *type = Py_TYPE(record);
        type->tp_free(record);
        Py_DECREF(type);
    }
#endif
}

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
    /* A subclass with a __dict__ (no __slots__) may be made part of a cycle through it: tracked. */
    int untracked = cannot_form_cycles(fields) && (cls == listed_type || adq_plain_named_tuple(cls));
    PyObject *record;
    if (untracked && cls == listed_type) {
        record = untracked_record();
    } else {
        record = cls->tp_alloc(cls, FIELDS); /* zeroed and tracked */
        if (record != NULL && untracked) PyObject_GC_UnTrack(record);
    }
    if (record == NULL) return NULL;
    for (int f = 0; f < FIELDS; f++) PyTuple_SET_ITEM(record, f, Py_NewRef(fields[f]));
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

/* install_record_call(Record): Record(...) calls record_vectorcall, and Record's untracked instances
 * go on the free list when freed (when the type is laid out as a NamedTuple is). */
PyObject *adq_py_install_record_call(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 1 || !PyType_Check(args[0]) || !PyType_IsSubtype((PyTypeObject *)args[0], &PyTuple_Type) ||
        !(((PyTypeObject *)args[0])->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
        PyErr_SetString(PyExc_TypeError, "install_record_call(Record): Record is a NamedTuple class");
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)args[0];
    type->tp_vectorcall = record_vectorcall;
    drain();
    /* Only a type laid out as a NamedTuple is: its instances are allocated and filled here. */
    int plain = adq_plain_named_tuple(type);
    Py_XSETREF(listed_type, plain ? (PyTypeObject *)Py_NewRef(type) : NULL);
    if (plain) type->tp_dealloc = record_dealloc;
    Py_RETURN_NONE;
}
