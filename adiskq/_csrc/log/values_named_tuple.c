/* What the free lists of log/values_message.c (Messages) and log/values_receipt.c (Receipts) share: whether a type is laid
 * out as a NamedTuple is, so that their dealloc may take its instances, and the ordinary dealloc of
 * such a tuple, for the instances that do not go on a free list. */
#include "../core.h"

/* A heap type directly below tuple, adding no slots, dict, weak references or finalizer: what
 * typing.NamedTuple makes. Such a type's instances are freed correctly by a tuple's dealloc plus
 * the release of the instance's reference to its heap type. */
int adq_plain_named_tuple(PyTypeObject *type) {
    return type->tp_base == &PyTuple_Type && (type->tp_flags & Py_TPFLAGS_HEAPTYPE) &&
           type->tp_basicsize == PyTuple_Type.tp_basicsize && type->tp_itemsize == PyTuple_Type.tp_itemsize &&
           type->tp_dictoffset == 0 && type->tp_weaklistoffset == 0 && type->tp_finalize == NULL &&
           type->tp_del == NULL && type->tp_free == PyObject_GC_Del;
}

/* The ordinary path of `dealloc` (the type's tp_dealloc, which called this): what tuple's dealloc
 * does, plus the release of the type. Also runs for the tuple part of a subclass's instance. */
void adq_named_tuple_free(PyObject *self, destructor dealloc) {
    PyTypeObject *type = Py_TYPE(self);
    Py_ssize_t size = Py_SIZE(self);
    PyObject **items = ((PyTupleObject *)self)->ob_item;
    PyObject_GC_UnTrack(self);
    Py_TRASHCAN_BEGIN(self, dealloc)
    for (Py_ssize_t i = 0; i < size; i++) Py_CLEAR(items[i]);
    type->tp_free(self);
    Py_DECREF(type);
    Py_TRASHCAN_END
}
