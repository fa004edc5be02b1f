/* `async for message in consumer`: the messages of the last batch read, handed out one per step
 * without running any Python.
 *
 * A Buffer holds a list of messages and the index of the next one. Its __anext__ (the am_anext
 * slot) returns a Ready awaitable for a buffered message: awaiting it gives the message at once
 * (the am_send slot, no StopIteration raised and caught) and never suspends, as the pure-Python
 * reader's buffered path never did. With nothing buffered, or once closed, __anext__ returns
 * what `refill()` returns instead: the reader's coroutine that reads (or waits for) the next batch,
 * raises ClosedError or StopAsyncIteration, and calls set() with the new batch.
 *
 * `async for` drops each Ready as soon as it gave its message, before it asks for the next: one
 * spare Ready is kept when it is freed and handed out again, so a step allocates nothing of its own
 * (an allocation and a free were ~60 of the ~1,370 instructions a message read with `async for`
 * cost, callgrind). A Ready still held elsewhere (a task made of __anext__) is simply not the spare. */
#include "../core.h"

typedef struct {
    PyObject_HEAD
    PyObject *value; /* given once by the first send; NULL after */
} Ready;

#if defined(Py_REF_DEBUG) || defined(Py_TRACE_REFS) || defined(Py_GIL_DISABLED)
#define KEEP_SPARE 0 /* reusing an object there is more than setting its reference count */
#else
#define KEEP_SPARE 1
static Ready *spare = NULL; /* a freed Ready, kept for the next step (the GIL guards it) */
#endif

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h> /* the spare is poisoned: a use after free is still caught */
#define POISON_SPARE(op) ASAN_POISON_MEMORY_REGION((op), sizeof(Ready))
#define UNPOISON_SPARE(op) ASAN_UNPOISON_MEMORY_REGION((op), sizeof(Ready))
#else
#define POISON_SPARE(op) ((void)0)
#define UNPOISON_SPARE(op) ((void)0)
#endif

static void ready_dealloc(Ready *self) {
    Py_CLEAR(self->value); /* may run a __del__, which may free or take the spare meanwhile */
#if KEEP_SPARE
    if (spare == NULL) {
        spare = self;
        POISON_SPARE(self);
        return;
    }
#endif
    PyObject_Free(self);
}

static PyTypeObject ReadyType;

static Ready *ready_new(PyObject *value) {
    Ready *ready;
#if KEEP_SPARE
    if (spare != NULL) {
        ready = spare;
        spare = NULL;
        UNPOISON_SPARE(ready);
        Py_SET_REFCNT(ready, 1); /* a static type: no type reference to take again */
    } else
#endif
    {
        ready = PyObject_New(Ready, &ReadyType);
        if (ready == NULL) return NULL;
    }
    ready->value = Py_NewRef(value);
    return ready;
}

static PyObject *ready_await(PyObject *self) { return Py_NewRef(self); }

static PySendResult ready_send(PyObject *op, PyObject *arg, PyObject **result) {
    (void)arg;
    Ready *self = (Ready *)op;
    if (self->value == NULL) {
        PyErr_SetNone(PyExc_StopIteration);
        *result = NULL;
        return PYGEN_ERROR;
    }
    *result = self->value; /* the reference moves to the caller */
    self->value = NULL;
    return PYGEN_RETURN;
}

/* The iterator protocol, for awaiting it through __await__().__next__() (not the fast path). */
static PyObject *ready_next(PyObject *op) {
    Ready *self = (Ready *)op;
    if (self->value != NULL) {
        /* StopIteration(value) made explicitly: a tuple (a Message is one) must not become its args. */
        PyObject *stop = PyObject_CallOneArg(PyExc_StopIteration, self->value);
        Py_CLEAR(self->value);
        if (stop != NULL) {
            PyErr_SetObject(PyExc_StopIteration, stop);
            Py_DECREF(stop);
        }
    }
    return NULL;
}

static PyAsyncMethods ready_async = {ready_await, NULL, NULL, ready_send};

static PyTypeObject ReadyType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "adiskq._compiled.Ready",
    .tp_basicsize = sizeof(Ready),
    .tp_dealloc = (destructor)ready_dealloc,
    .tp_as_async = &ready_async,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = ready_next,
    .tp_doc = "A message available now: awaiting it returns the message without suspending.",
};

typedef struct {
    PyObject_HEAD
    PyObject *items;  /* a list */
    Py_ssize_t index; /* of the next message to hand out */
    PyObject *refill; /* () -> awaitable: the reader's slow path */
    int closed;
} Buffer;

static int buffer_traverse(Buffer *self, visitproc visit, void *arg) {
    Py_VISIT(self->items);
    Py_VISIT(self->refill);
    return 0;
}

static int buffer_clear(Buffer *self) {
    Py_CLEAR(self->items);
    Py_CLEAR(self->refill);
    return 0;
}

static void buffer_dealloc(Buffer *self) {
    PyObject_GC_UnTrack(self);
    buffer_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *buffer_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *refill;
    static char *names[] = {"refill", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:Buffer", names, &refill)) return NULL;
    Buffer *self = (Buffer *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->items = PyList_New(0);
    if (self->items == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    self->refill = Py_NewRef(refill);
    return (PyObject *)self;
}

static PyObject *buffer_anext(PyObject *op) {
    Buffer *self = (Buffer *)op;
    if (!self->closed && self->index < PyList_GET_SIZE(self->items)) {
        Ready *ready = ready_new(PyList_GET_ITEM(self->items, self->index));
        if (ready == NULL) return NULL;
        self->index++;
        return (PyObject *)ready;
    }
    return PyObject_CallNoArgs(self->refill);
}

/* set(items, index=0): the buffer is now these messages, handing out from `index` on. */
static PyObject *buffer_set(PyObject *op, PyObject *const *args, Py_ssize_t nargs) {
    Buffer *self = (Buffer *)op;
    if (nargs < 1 || nargs > 2 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "set(items: list, index: int = 0)");
        return NULL;
    }
    Py_ssize_t index = nargs > 1 ? PyLong_AsSsize_t(args[1]) : 0;
    if (index == -1 && PyErr_Occurred()) return NULL;
    Py_SETREF(self->items, Py_NewRef(args[0]));
    self->index = index < 0 ? 0 : index;
    Py_RETURN_NONE;
}

/* take(most) -> list | None: up to `most` buffered messages (handed out), or None if none are. A
 * negative count is refused: it would move the index back before messages already handed out. */
static PyObject *buffer_take(PyObject *op, PyObject *most_arg) {
    Buffer *self = (Buffer *)op;
    Py_ssize_t most = PyNumber_AsSsize_t(most_arg, NULL); /* a count past the list's size takes all */
    if (most == -1 && PyErr_Occurred()) return NULL;
    if (most < 0) {
        PyErr_Format(PyExc_ValueError, "take(most): most is a count of 0 or more, not %zd", most);
        return NULL;
    }
    Py_ssize_t size = PyList_GET_SIZE(self->items);
    if (self->index >= size) Py_RETURN_NONE;
    Py_ssize_t end = most < size - self->index ? self->index + most : size;
    PyObject *taken = PyList_GetSlice(self->items, self->index, end);
    if (taken != NULL) self->index = end;
    return taken;
}

static PyObject *buffer_clear_method(PyObject *op, PyObject *unused) {
    (void)unused;
    Buffer *self = (Buffer *)op;
    PyObject *empty = PyList_New(0);
    if (empty == NULL) return NULL;
    Py_SETREF(self->items, empty);
    self->index = 0;
    Py_RETURN_NONE;
}

static PyObject *buffer_close(PyObject *op, PyObject *unused) {
    ((Buffer *)op)->closed = 1;
    return buffer_clear_method(op, unused);
}

static PyObject *buffer_remaining(PyObject *op, void *closure) {
    (void)closure;
    Buffer *self = (Buffer *)op;
    Py_ssize_t left = PyList_GET_SIZE(self->items) - self->index;
    return PyLong_FromSsize_t(left > 0 ? left : 0);
}

static PyMethodDef buffer_methods[] = {
    {"set", (PyCFunction)(void (*)(void))buffer_set, METH_FASTCALL, "set(items, index=0)"},
    {"take", buffer_take, METH_O, "take(most) -> list | None"},
    {"clear", buffer_clear_method, METH_NOARGS, "drop the buffered messages"},
    {"close", buffer_close, METH_NOARGS, "drop them, and send every later __anext__ to refill()"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef buffer_getset[] = {
    {"remaining", buffer_remaining, NULL, "messages buffered and not yet handed out", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyAsyncMethods buffer_async = {NULL, PyObject_SelfIter, buffer_anext, NULL};

static PyTypeObject BufferType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "adiskq._compiled.Buffer",
    .tp_basicsize = sizeof(Buffer),
    .tp_dealloc = (destructor)buffer_dealloc,
    .tp_as_async = &buffer_async,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)buffer_traverse,
    .tp_clear = (inquiry)buffer_clear,
    .tp_methods = buffer_methods,
    .tp_getset = buffer_getset,
    .tp_new = buffer_new,
    .tp_doc = "Buffer(refill): the last batch's messages for `async for`; see adiskq/_csrc/log/buffered.c.",
};

int adq_add_iteration_types(PyObject *module) {
    if (PyType_Ready(&ReadyType) < 0 || PyType_Ready(&BufferType) < 0) return -1;
    Py_INCREF(&BufferType);
    if (PyModule_AddObject(module, "Buffer", (PyObject *)&BufferType) < 0) {
        Py_DECREF(&BufferType);
        return -1;
    }
    return 0;
}
