/* adiskq.Receipt objects as receipts() (log/codec_encode.c) makes them for push_many: allocated untracked, and
 * kept on a free list when freed, so that a batch's receipts reuse the previous batch's tuples. The
 * same scheme as log/values_message.c's for Messages (see there for the reasoning at length).
 *
 * Why: push_many of 1,000 records returns 1,000 Receipts, which the caller mostly drops at once.
 * Through CPython's own paths each is an allocation and a free with the GC's bookkeeping (a Receipt
 * is a tuple, a GC type, even untracked), and the Receipt type's dealloc is subtype_dealloc calling
 * tuple's. Every GC allocation also counts towards the young generation's threshold whether the
 * object is tracked or not, so a batch's receipts started a collection of their own. A Receipt taken
 * from the free list is neither allocated nor counted, and returning one is two decrefs and a store.
 *
 * The free list is process-wide and bounded (FREE_RECEIPTS tuples of two slots, 56 bytes each, about
 * 112 KiB at most). Only exact Receipts of two items that are untracked when freed go on it (those a
 * user built with Receipt(...) are tracked and leave through the ordinary path); a subclass of
 * Receipt has its own subtype_dealloc, which calls receipt_dealloc for the tuple part. Builds that
 * count or trace references, and the free-threaded build, keep no free list. Under AddressSanitizer a
 * Receipt on the free list is poisoned, so a use after free is still caught. */
#include "../core.h"

#if defined(Py_REF_DEBUG) || defined(Py_TRACE_REFS) || defined(Py_GIL_DISABLED)
#define FREE_RECEIPTS 0
#else
#define FREE_RECEIPTS 2048 /* a push_many of up to 2,048 records reuses the receipts of the one before */
#endif

#define FIELDS 2 /* partition, offset */

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(op) ASAN_POISON_MEMORY_REGION((op), Py_TYPE(op)->tp_basicsize + FIELDS * sizeof(PyObject *))
#define UNPOISON(op, type) ASAN_UNPOISON_MEMORY_REGION((op), (type)->tp_basicsize + FIELDS * sizeof(PyObject *))
#else
#define POISON(op) ((void)0)
#define UNPOISON(op, type) ((void)0)
#endif

#if FREE_RECEIPTS
static PyObject *free_receipts[FREE_RECEIPTS];
static int free_count = 0;
#endif

PyObject *adq_receipt_new(void) {
    PyObject *receipt = NULL;
#if FREE_RECEIPTS
    if (free_count > 0) {
        receipt = free_receipts[--free_count];
        UNPOISON(receipt, adq_receipt_type);
        Py_SET_REFCNT(receipt, 1); /* it kept its type's reference and its size while on the list */
    }
#endif
    /* Allocated untracked and filled whole by the caller (tp_alloc would zero, track, and leave it
     * to untrack): two ints never form a cycle. */
    if (receipt == NULL) receipt = (PyObject *)PyObject_GC_NewVar(PyTupleObject, adq_receipt_type, FIELDS);
#if PY_VERSION_HEX >= 0x030E0000
    /* Python 3.14 caches a tuple's hash in the tuple: a reused one must not answer its last hash. */
    if (receipt != NULL) ((PyTupleObject *)receipt)->ob_hash = -1;
#endif
    return receipt;
}

/* The Receipt type's tp_dealloc (installed by adq_receipt_install). As message_dealloc, it also runs
 * for the tuple part of a subclass's instance, and then does what tuple's dealloc would, plus the
 * release of the instance's reference to its heap type. */
static void receipt_dealloc(PyObject *self) {
#if FREE_RECEIPTS
    PyTypeObject *type = Py_TYPE(self);
    Py_ssize_t size = Py_SIZE(self);
    PyObject **items = ((PyTupleObject *)self)->ob_item;
    if (type == adq_receipt_type && size == FIELDS && !PyObject_GC_IsTracked(self)) {
        Py_XDECREF(items[0]);
        Py_XDECREF(items[1]);
        /* Counted after the decrefs: one may have run a __del__ that freed other Receipts. */
        if (free_count < FREE_RECEIPTS) {
            free_receipts[free_count++] = self;
            POISON(self);
        } else {
            type->tp_free(self);
            Py_DECREF(type);
        }
        return;
    }
#endif
    adq_named_tuple_free(self, receipt_dealloc);
}

/* Free the Receipts on the free list (before another type becomes the Receipt type). */
static void drain(void) {
#if FREE_RECEIPTS
    while (free_count > 0) {
        PyObject *receipt = free_receipts[--free_count];
        UNPOISON(receipt, adq_receipt_type); /* the only type on the list */
        PyTypeObject *type = Py_TYPE(receipt);
        type->tp_free(receipt);
        Py_DECREF(type);
    }
#endif
}

/* Make `type` the type adq_receipt_new builds, and give it receipt_dealloc when it is laid out as a
 * NamedTuple is (a heap type directly below tuple, adding no slots, dict, weak references or
 * finalizer): receipt_dealloc frees any such tuple correctly, a Receipt or not. Any other type keeps
 * its own dealloc, and its instances never go on the free list. */
void adq_receipt_install(PyTypeObject *type) {
    drain();
    Py_XSETREF(adq_receipt_type, (PyTypeObject *)Py_NewRef(type));
    if (adq_plain_named_tuple(type)) type->tp_dealloc = receipt_dealloc;
}

/* receipt(partition, offset) -> Receipt(partition, offset): a single push's receipt, off the free list
 * as receipts() takes push_many's (tuple.__new__(Receipt, ...) allocates the argument tuples and a
 * tracked tuple). Both are ints, exactly (TypeError otherwise), as adiskq/_sansio/core.py's
 * reference_receipt checks them; ValueError before configure(). */
PyObject *adq_py_receipt(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2 || !PyLong_CheckExact(args[0]) || !PyLong_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "receipt(partition: int, offset: int)");
        return NULL;
    }
    if (adq_receipt_type == NULL) {
        PyErr_SetString(PyExc_ValueError, "receipt: configure() first");
        return NULL;
    }
    PyObject *receipt = adq_receipt_new(); /* untracked: two ints never form a cycle */
    if (receipt == NULL) return NULL;
    PyTuple_SET_ITEM(receipt, 0, Py_NewRef(args[0]));
    PyTuple_SET_ITEM(receipt, 1, Py_NewRef(args[1]));
    return receipt;
}
