/* adiskq.Message objects as the decoder makes them: allocated untracked, and kept on a free list when
 * freed, so that a batch read reuses the previous batch's tuples.
 *
 * Why: reading with batches(), each Message is allocated as the next batch is decoded and freed
 * when the caller drops the batch before. Through CPython's own paths that is an allocation and a
 * free with the GC's bookkeeping (a Message is a tuple, a GC type, even when it is never tracked),
 * and the Message type's dealloc is subtype_dealloc calling tuple's: together ~450 instructions a
 * message of the ~1,370 a batches() read cost (callgrind, benchmarks/RESULTS.md "W4 batches()").
 * Worse, every GC allocation counts towards the young generation's threshold whether the object is
 * tracked or not, so a batch of 1,000 Messages started a collection that walked the batch's list.
 * A Message taken from the free list is neither allocated nor counted, and returning one is seven
 * decrefs and a store.
 *
 * The free list is process-wide (as the rest of the module's state) and bounded (FREE_MESSAGES
 * tuples of seven slots, ~96 bytes each, about 200 KiB at most). Only exact Messages of seven items
 * that are untracked when freed go on it (those that held headers were tracked and leave through
 * the ordinary path, under the trashcan, as a tuple would); a subclass of Message has its own
 * subtype_dealloc, which calls message_dealloc for the tuple part (see there). Builds that count
 * or trace references (Py_REF_DEBUG, Py_TRACE_REFS), and the free-threaded build, keep no free
 * list: reusing an object there is more than setting its reference count. Under AddressSanitizer a
 * Message on the free list is poisoned, so a use after free is still caught. */
#include "../core.h"

#if defined(Py_REF_DEBUG) || defined(Py_TRACE_REFS) || defined(Py_GIL_DISABLED)
#define FREE_MESSAGES 0
#else
#define FREE_MESSAGES 2048 /* a batch of up to 2,048 messages is built from the one before it */
#endif

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(op) ASAN_POISON_MEMORY_REGION((op), Py_TYPE(op)->tp_basicsize + ADQ_MESSAGE_FIELDS * sizeof(PyObject *))
#define UNPOISON(op, type) \
    ASAN_UNPOISON_MEMORY_REGION((op), (type)->tp_basicsize + ADQ_MESSAGE_FIELDS * sizeof(PyObject *))
#else
#define POISON(op) ((void)0)
#define UNPOISON(op, type) ((void)0)
#endif

#if FREE_MESSAGES
static PyObject *free_messages[FREE_MESSAGES];
static int free_count = 0;
#endif

static void message_dealloc(PyObject *self);

PyObject *adq_message_new(void) {
    PyObject *message = NULL;
#if FREE_MESSAGES
    if (free_count > 0) {
        message = free_messages[--free_count];
        UNPOISON(message, adq_message_type);
        Py_SET_REFCNT(message, 1); /* it kept its type's reference and its size while on the list */
    }
#endif
    if (message == NULL) message = (PyObject *)PyObject_GC_NewVar(PyTupleObject, adq_message_type, ADQ_MESSAGE_FIELDS);
#if PY_VERSION_HEX >= 0x030E0000
    /* Python 3.14 caches a tuple's hash in the tuple, -1 until it is computed: a reused tuple (or a
     * fresh one, which PyObject_GC_NewVar leaves unset) must not answer its last hash. */
    if (message != NULL) ((PyTupleObject *)message)->ob_hash = -1;
#endif
    return message;
}

/* The Message type's tp_dealloc (installed by adq_message_install). It also runs for the tuple part
 * of a subclass's instance, called by that subclass's subtype_dealloc (which has untracked it and
 * cleared the subclass's own slots), and must then do what tuple's dealloc would, plus the release
 * of the instance's reference to its heap type that subtype_dealloc leaves to a heap base's dealloc. */
static void message_dealloc(PyObject *self) {
#if FREE_MESSAGES
    PyTypeObject *type = Py_TYPE(self);
    Py_ssize_t size = Py_SIZE(self);
    PyObject **items = ((PyTupleObject *)self)->ob_item;
    if (type == adq_message_type && size == ADQ_MESSAGE_FIELDS && !PyObject_GC_IsTracked(self)) {
        /* Untracked: it holds ints, bytes, a str or None and the shared empty headers (or what a
         * user gave Message(), all of it untracked too), so no deep chain of deallocs starts here.
         * Unrolled; X: a message whose building failed (log/codec_decode.c) has NULL items. */
        Py_XDECREF(items[0]);
        Py_XDECREF(items[1]);
        Py_XDECREF(items[2]);
        Py_XDECREF(items[3]);
        Py_XDECREF(items[4]);
        Py_XDECREF(items[5]);
        Py_XDECREF(items[6]);
        /* Counted after the decrefs: one may have run a __del__ that freed other Messages. */
        if (free_count < FREE_MESSAGES) {
            free_messages[free_count++] = self;
            POISON(self);
        } else {
            type->tp_free(self);
            Py_DECREF(type);
        }
        return;
    }
#endif
    adq_named_tuple_free(self, message_dealloc);
}

/* Free the Messages on the free list (before another type becomes the Message type). */
static void drain(void) {
#if FREE_MESSAGES
    while (free_count > 0) {
        PyObject *message = free_messages[--free_count];
        UNPOISON(message, adq_message_type); /* the only type on the list */
        PyTypeObject *type = Py_TYPE(message);
        type->tp_free(message);
        Py_DECREF(type);
    }
#endif
}

/* Make `type` the type adq_message_new builds, and give it message_dealloc when it is laid out as
 * a NamedTuple is (a heap type directly below tuple, adding no slots, dict, weak references or
 * finalizer): message_dealloc frees any such tuple correctly, a Message or not. Any other type keeps
 * its own dealloc, and its instances never go on the free list. */
void adq_message_install(PyTypeObject *type) {
    drain();
    Py_XSETREF(adq_message_type, (PyTypeObject *)Py_NewRef(type));
    if (adq_plain_named_tuple(type)) type->tp_dealloc = message_dealloc;
}
