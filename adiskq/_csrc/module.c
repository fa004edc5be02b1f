/* adiskq._compiled: the module object, its functions, and the two objects it builds Messages with
 * (adiskq.Message and the shared empty headers), which adiskq/_sansio/core.py hands to configure()
 * at import. Single-phase initialisation with process-wide state: adiskq does not support
 * subinterpreters. */
#include "core.h"
#include "kafka/codec.h"

PyTypeObject *adq_message_type = NULL;
PyObject *adq_empty_headers = NULL;
PyTypeObject *adq_record_type = NULL;
PyTypeObject *adq_receipt_type = NULL;

static int is_tuple_type(PyObject *candidate) {
    return PyType_Check(candidate) && PyType_IsSubtype((PyTypeObject *)candidate, &PyTuple_Type);
}

/* A tuple type laid out as a tuple (a NamedTuple: __slots__ = ()), whose instances the core may
 * allocate and fill itself: one with a __dict__ or __weakref__ slot would hold uninitialised pointers. */
static int is_plain_tuple_type(PyObject *candidate) {
    if (!is_tuple_type(candidate)) return 0;
    PyTypeObject *type = (PyTypeObject *)candidate;
    return type->tp_basicsize == PyTuple_Type.tp_basicsize && type->tp_itemsize == PyTuple_Type.tp_itemsize &&
           type->tp_dictoffset == 0 && type->tp_weaklistoffset == 0;
}

/* configure(Message, EMPTY_HEADERS, Record, Receipt, seed) */
static PyObject *configure(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 5 || !is_plain_tuple_type(args[0]) || !is_tuple_type(args[2]) || !is_plain_tuple_type(args[3])) {
        PyErr_SetString(PyExc_TypeError, "configure(Message, EMPTY_HEADERS, Record, Receipt, seed): the types are "
                                         "tuple types, Message and Receipt without instance attributes");
        return NULL;
    }
    unsigned long long seed = PyLong_AsUnsignedLongLongMask(args[4]);
    if (PyErr_Occurred()) return NULL;
    adq_message_install((PyTypeObject *)args[0]);
    Py_XSETREF(adq_empty_headers, Py_NewRef(args[1]));
    Py_XSETREF(adq_record_type, (PyTypeObject *)Py_NewRef(args[2]));
    adq_receipt_install((PyTypeObject *)args[3]);
    adq_random_state = seed;
    Py_RETURN_NONE;
}

static int buffer_arg(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t want, const char *name, Py_buffer *view) {
    if (nargs < want || nargs > want + 1) {
        PyErr_Format(PyExc_TypeError, "%s takes %zd or %zd arguments", name, want, want + 1);
        return -1;
    }
    return PyObject_GetBuffer(args[0], view, PyBUF_SIMPLE);
}

/* crc32c(data, value=0) -> int, as the crc32c package's (the value continues an earlier CRC). */
static PyObject *py_crc32c(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    Py_buffer view;
    if (buffer_arg(args, nargs, 1, "crc32c", &view) < 0) return NULL;
    unsigned long start = nargs > 1 ? PyLong_AsUnsignedLongMask(args[1]) : 0;
    if (PyErr_Occurred()) {
        PyBuffer_Release(&view);
        return NULL;
    }
    uint32_t crc = adq_crc32c((uint32_t)start, view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}

/* crc32c_table(data, value=0): the same, always by table (tests compare it with the instruction). */
static PyObject *py_crc32c_table(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    Py_buffer view;
    if (buffer_arg(args, nargs, 1, "crc32c_table", &view) < 0) return NULL;
    unsigned long start = nargs > 1 ? PyLong_AsUnsignedLongMask(args[1]) : 0;
    if (PyErr_Occurred()) {
        PyBuffer_Release(&view);
        return NULL;
    }
    uint32_t crc = adq_crc32c_table((uint32_t)start, view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}

static PyObject *py_crc32(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    Py_buffer view;
    if (buffer_arg(args, nargs, 1, "crc32", &view) < 0) return NULL;
    unsigned long start = nargs > 1 ? PyLong_AsUnsignedLongMask(args[1]) : 0;
    if (PyErr_Occurred()) {
        PyBuffer_Release(&view);
        return NULL;
    }
    uint32_t crc = adq_crc32((uint32_t)start, view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}

static PyObject *py_fnv1_32(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    Py_buffer view;
    if (buffer_arg(args, nargs, 1, "fnv1_32", &view) < 0) return NULL;
    if (nargs > 1) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "fnv1_32 takes 1 argument");
        return NULL;
    }
    uint32_t value = adq_fnv1_32(view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(value);
}

static PyMethodDef methods[] = {
    {"configure", (PyCFunction)(void (*)(void))configure, METH_FASTCALL, "configure(Message, EMPTY_HEADERS, Record, Receipt, seed)"},
    {"crc32c", (PyCFunction)(void (*)(void))py_crc32c, METH_FASTCALL, "CRC-32C of a buffer"},
    {"crc32c_table", (PyCFunction)(void (*)(void))py_crc32c_table, METH_FASTCALL, "CRC-32C by table"},
    {"crc32", (PyCFunction)(void (*)(void))py_crc32, METH_FASTCALL, "zlib's CRC-32 of a buffer"},
    {"fnv1_32", (PyCFunction)(void (*)(void))py_fnv1_32, METH_FASTCALL, "FNV-1 32-bit of a buffer"},
    {"encode_record", (PyCFunction)(void (*)(void))adq_py_encode_record, METH_FASTCALL, "see log/codec_encode.c"},
    {"encode_batch", (PyCFunction)(void (*)(void))adq_py_encode_batch, METH_FASTCALL, "see log/codec_encode.c"},
    {"encode_records", (PyCFunction)(void (*)(void))adq_py_encode_records, METH_FASTCALL, "see log/codec_encode.c"},
    {"decode_at", (PyCFunction)(void (*)(void))adq_py_decode_at, METH_FASTCALL, "see log/codec_decode.c"},
    {"tag_column", (PyCFunction)(void (*)(void))adq_py_tag_column, METH_FASTCALL, "see log/tags.c"},
    {"matching_entries", (PyCFunction)(void (*)(void))adq_py_matching_entries, METH_FASTCALL, "see log/tags.c"},
    {"matching_records", (PyCFunction)(void (*)(void))adq_py_matching_records, METH_FASTCALL, "see log/tags.c"},
    {"receipts", (PyCFunction)(void (*)(void))adq_py_receipts, METH_FASTCALL, "see log/codec_encode.c"},
    {"receipt", (PyCFunction)(void (*)(void))adq_py_receipt, METH_FASTCALL, "see log/values_receipt.c"},
    {"record_new", (PyCFunction)(void (*)(void))adq_py_record_new, METH_FASTCALL | METH_KEYWORDS,
     "record_new($module, cls, /, value, key=None, headers=None, timestamp=None)\n--\n\nRecord's __new__."},
    {"install_record_call", (PyCFunction)(void (*)(void))adq_py_install_record_call, METH_FASTCALL, "see log/values.c"},
    {"sorted_key_values", (PyCFunction)(void (*)(void))adq_py_sorted_key_values, METH_FASTCALL, "see log/keyindex.c"},
    {"place", (PyCFunction)(void (*)(void))adq_py_place, METH_FASTCALL, "see log/codec_encode.c"},
    {"encode_push", (PyCFunction)(void (*)(void))adq_py_encode_push, METH_FASTCALL, "see log/codec_encode.c"},
    {"index_entries", (PyCFunction)(void (*)(void))adq_py_index_entries, METH_FASTCALL, "see log/codec_encode.c"},
    {"pack_records", (PyCFunction)(void (*)(void))adq_py_pack_records, METH_FASTCALL, "see log/pack.c"},
    {"decode_messages", (PyCFunction)(void (*)(void))adq_py_decode_messages, METH_FASTCALL, "see log/codec_decode.c"},
    {"scan_columns", (PyCFunction)(void (*)(void))adq_py_scan_columns, METH_FASTCALL, "see log/codec_scan.c"},
    {"next_valid_record", (PyCFunction)(void (*)(void))adq_py_next_valid_record, METH_FASTCALL, "see log/codec_scan.c"},
    {"zstd_prepare", (PyCFunction)(void (*)(void))adq_py_zstd_prepare, METH_FASTCALL, "see log/compression.c"},
    {"zstd_compress", (PyCFunction)(void (*)(void))adq_py_zstd_compress, METH_FASTCALL, "see log/compression.c"},
    {"append_record", (PyCFunction)(void (*)(void))adq_py_append_record, METH_FASTCALL, "see log/append.c"},
    {"append_one", (PyCFunction)(void (*)(void))adq_py_append_one, METH_FASTCALL, "see log/append.c"},
    {"kafka_decode_records", (PyCFunction)(void (*)(void))adq_py_kafka_decode_records, METH_FASTCALL,
     "see kafka/codec_decode.c"},
    {"kafka_decode_batches", (PyCFunction)(void (*)(void))adq_py_kafka_decode_batches, METH_FASTCALL,
     "see kafka/codec_decode.c"},
    {"kafka_encode_records", (PyCFunction)(void (*)(void))adq_py_kafka_encode_records, METH_FASTCALL,
     "see kafka/codec_encode.c"},
    {"kafka_encode_batch", (PyCFunction)(void (*)(void))adq_py_kafka_encode_batch, METH_FASTCALL,
     "see kafka/codec_encode.c"},
    {"kafka_encode_messages", (PyCFunction)(void (*)(void))adq_py_kafka_encode_messages, METH_FASTCALL,
     "see kafka/codec_encode.c"},
    {"kafka_stored_records", (PyCFunction)(void (*)(void))adq_py_kafka_stored_records, METH_FASTCALL,
     "see kafka/mapping.c"},
    {"kafka_batch_from_stored", (PyCFunction)(void (*)(void))adq_py_kafka_batch_from_stored, METH_FASTCALL,
     "see kafka/stored_batch.c"},
    {"kafka_fetch_answer", (PyCFunction)(void (*)(void))adq_py_kafka_fetch_answer, METH_FASTCALL,
     "see kafka/fetch_answer.c"},
    {"kafka_fetch_request", (PyCFunction)(void (*)(void))adq_py_kafka_fetch_request, METH_FASTCALL,
     "see kafka/fetch_request.c"},
    {"kafka_produce_request", (PyCFunction)(void (*)(void))adq_py_kafka_produce_request, METH_FASTCALL,
     "see kafka/produce_request.c"},
    {"place_entries", (PyCFunction)(void (*)(void))adq_py_place_entries, METH_FASTCALL, "see log/run_entries.c"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "adiskq._compiled", "adiskq's compiled core: see adiskq/_csrc/core.h", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__compiled(void) {
    adq_crc32c_init();
    adq_crc32_init();
    if (adq_keyless_init() < 0) return NULL;
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) return NULL;
    if (PyModule_AddStringConstant(module, "crc32c_implementation", adq_crc32c_implementation()) < 0 ||
        adq_add_iteration_types(module) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
