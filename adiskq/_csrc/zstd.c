/* Values compressed with a stream's zstd dictionary: libzstd reached at run time, and the values it
 * compresses and decompresses (adiskq/_sansio/compression.py states the format and is the reference).
 *
 * libzstd is opened with dlopen("libzstd.so.1") at the first dictionary prepared, not linked: building
 * adiskq needs only gcc and the Python headers (no libzstd-dev), and a stream without compression
 * never loads it. The functions called are the few of zstd's stable API declared below, with the
 * signatures zstd.h gives them since 1.0 (Debian's dpkg depends on libzstd1, so the library is on every
 * Debian machine). Where it cannot be loaded, zstd_prepare returns None and the Python side falls back
 * to the reference (the `zstandard` binding) or says what to install.
 *
 * A prepared dictionary is a capsule holding its ZSTD_DDict and ZSTD_CDict (digested once) and its id.
 * One decompression context and one compression context serve every call: they are used only with the
 * GIL held. *
 * Values are compressed with ZSTD_compress_usingCDict. The stable API's other way, a compression
 * context per dictionary given small-input parameters (ZSTD_CCtx_setParameter: level, window, hash
 * and chain logs of 10 to 15) and the dictionary once (ZSTD_CCtx_loadDictionary), then ZSTD_compress2
 * per value, costs more under callgrind, not less: about 12,100 instructions a 262-byte JSON value
 * against 11,400 (libzstd 1.5.4, level 3, same 54.6 bytes a value); its per-frame cost is the
 * block's match search and entropy coding, not table resets. */
#include <dlfcn.h>

#include "core.h"

typedef struct ZSTD_DCtx_s ZSTD_DCtx;
typedef struct ZSTD_CCtx_s ZSTD_CCtx;
typedef struct ZSTD_DDict_s ZSTD_DDict;
typedef struct ZSTD_CDict_s ZSTD_CDict;
#define ZSTD_CONTENTSIZE_UNKNOWN (0ULL - 1)
#define ZSTD_CONTENTSIZE_ERROR (0ULL - 2)

static struct {
    unsigned (*isError)(size_t);
    ZSTD_DCtx *(*createDCtx)(void);
    ZSTD_CCtx *(*createCCtx)(void);
    ZSTD_DDict *(*createDDict)(const void *, size_t);
    size_t (*freeDDict)(ZSTD_DDict *);
    ZSTD_CDict *(*createCDict)(const void *, size_t, int);
    size_t (*freeCDict)(ZSTD_CDict *);
    unsigned (*getDictID_fromDict)(const void *, size_t);
    unsigned (*getDictID_fromFrame)(const void *, size_t);
    unsigned long long (*getFrameContentSize)(const void *, size_t);
    size_t (*findFrameCompressedSize)(const void *, size_t);
    size_t (*decompress_usingDDict)(ZSTD_DCtx *, void *, size_t, const void *, size_t, const ZSTD_DDict *);
    size_t (*compress_usingCDict)(ZSTD_CCtx *, void *, size_t, const void *, size_t, const ZSTD_CDict *);
    size_t (*compressBound)(size_t);
} zstd;

static int zstd_state = 0; /* 0 not tried, 1 loaded, -1 cannot be loaded */
static ZSTD_DCtx *dctx = NULL;
static ZSTD_CCtx *cctx = NULL;

static int load_zstd(void) {
    if (zstd_state != 0) return zstd_state;
    zstd_state = -1;
    void *library = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) return -1;
#define ZSTD_SYMBOL(field, name)                                                                                     \
    if ((*(void **)&zstd.field = dlsym(library, name)) == NULL) return -1;
    ZSTD_SYMBOL(isError, "ZSTD_isError")
    ZSTD_SYMBOL(createDCtx, "ZSTD_createDCtx")
    ZSTD_SYMBOL(createCCtx, "ZSTD_createCCtx")
    ZSTD_SYMBOL(createDDict, "ZSTD_createDDict")
    ZSTD_SYMBOL(freeDDict, "ZSTD_freeDDict")
    ZSTD_SYMBOL(createCDict, "ZSTD_createCDict")
    ZSTD_SYMBOL(freeCDict, "ZSTD_freeCDict")
    ZSTD_SYMBOL(getDictID_fromDict, "ZSTD_getDictID_fromDict")
    ZSTD_SYMBOL(getDictID_fromFrame, "ZSTD_getDictID_fromFrame")
    ZSTD_SYMBOL(getFrameContentSize, "ZSTD_getFrameContentSize")
    ZSTD_SYMBOL(findFrameCompressedSize, "ZSTD_findFrameCompressedSize")
    ZSTD_SYMBOL(decompress_usingDDict, "ZSTD_decompress_usingDDict")
    ZSTD_SYMBOL(compress_usingCDict, "ZSTD_compress_usingCDict")
    ZSTD_SYMBOL(compressBound, "ZSTD_compressBound")
#undef ZSTD_SYMBOL
    dctx = zstd.createDCtx();
    cctx = zstd.createCCtx();
    if (dctx == NULL || cctx == NULL) return -1;
    zstd_state = 1;
    return 1;
}

#define PREPARED_NAME "adiskq.zstd_dictionary"

typedef struct {
    ZSTD_DDict *ddict;
    ZSTD_CDict *cdict;
    unsigned id;
} prepared_dictionary;

static void prepared_free(PyObject *capsule) {
    prepared_dictionary *prepared = PyCapsule_GetPointer(capsule, PREPARED_NAME);
    if (prepared == NULL) return;
    zstd.freeDDict(prepared->ddict);
    zstd.freeCDict(prepared->cdict);
    PyMem_Free(prepared);
}

/* zstd_prepare(dictionary: bytes, level: int) -> capsule, or None where libzstd cannot be loaded.
 * ValueError when the bytes are not a zstd dictionary with an id (what the reference checks first). */
PyObject *adq_py_zstd_prepare(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2 || !PyBytes_Check(args[0]) || !PyLong_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "zstd_prepare(dictionary: bytes, level: int)");
        return NULL;
    }
    long level = PyLong_AsLong(args[1]);
    if (level == -1 && PyErr_Occurred()) return NULL;
    if (level < -7 || level > 22) {
        PyErr_SetString(PyExc_ValueError, "zstd levels run from -7 to 22");
        return NULL;
    }
    if (load_zstd() < 0) Py_RETURN_NONE;
    const char *data = PyBytes_AS_STRING(args[0]);
    size_t length = (size_t)PyBytes_GET_SIZE(args[0]);
    unsigned id = zstd.getDictID_fromDict(data, length);
    if (id == 0) {
        PyErr_SetString(PyExc_ValueError, "not a zstd dictionary with an id");
        return NULL;
    }
    prepared_dictionary *prepared = PyMem_Calloc(1, sizeof(prepared_dictionary));
    if (prepared == NULL) return PyErr_NoMemory();
    prepared->id = id;
    prepared->ddict = zstd.createDDict(data, length);
    prepared->cdict = zstd.createCDict(data, length, (int)level);
    if (prepared->ddict == NULL || prepared->cdict == NULL) {
        zstd.freeDDict(prepared->ddict);
        zstd.freeCDict(prepared->cdict);
        PyMem_Free(prepared);
        PyErr_SetString(PyExc_ValueError, "libzstd refused the dictionary");
        return NULL;
    }
    PyObject *capsule = PyCapsule_New(prepared, PREPARED_NAME, prepared_free);
    if (capsule == NULL) {
        zstd.freeDDict(prepared->ddict);
        zstd.freeCDict(prepared->cdict);
        PyMem_Free(prepared);
    }
    return capsule;
}

int adq_zstd_is_prepared(PyObject *candidate) { return PyCapsule_IsValid(candidate, PREPARED_NAME); }

/* zstd_compress(prepared, value: bytes) -> bytes: one frame stating its content size and the
 * dictionary's id, without a checksum (the record's CRC-32C covers it). */
PyObject *adq_py_zstd_compress(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2 || !PyCapsule_IsValid(args[0], PREPARED_NAME) || !PyBytes_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "zstd_compress(prepared dictionary, value: bytes)");
        return NULL;
    }
    return adq_zstd_compress(args[0], args[1]);
}

PyObject *adq_zstd_compress(PyObject *capsule, PyObject *value) {
    prepared_dictionary *prepared = PyCapsule_GetPointer(capsule, PREPARED_NAME);
    if (prepared == NULL) return NULL;
    size_t length = (size_t)PyBytes_GET_SIZE(value);
    size_t bound = zstd.compressBound(length);
    PyObject *frame = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)bound);
    if (frame == NULL) return NULL;
    size_t written = zstd.compress_usingCDict(cctx, PyBytes_AS_STRING(frame), bound, PyBytes_AS_STRING(value),
                                              length, prepared->cdict);
    if (zstd.isError(written)) {
        Py_DECREF(frame);
        PyErr_SetString(PyExc_ValueError, "libzstd could not compress the value");
        return NULL;
    }
    if (_PyBytes_Resize(&frame, (Py_ssize_t)written) < 0) return NULL;
    return frame;
}

/* The value a record's frame holds, or NULL without an exception set when the frame is not one whole
 * frame of this stream's dictionaries stating a content size of at most `limit` and holding exactly
 * that many bytes (the caller lets the reference name what is wrong). NULL with an exception set is
 * an allocation failure. `dictionaries` maps dictionary ids to prepared dictionaries (a dict), or is
 * NULL. */
PyObject *adq_zstd_decompress(const uint8_t *frame, size_t length, PyObject *dictionaries, size_t limit) {
    if (dictionaries == NULL || zstd_state != 1) return NULL;
    unsigned id = zstd.getDictID_fromFrame(frame, length);
    if (id == 0) return NULL;
    PyObject *key = PyLong_FromUnsignedLong(id);
    if (key == NULL) return NULL;
    PyObject *capsule = PyDict_GetItemWithError(dictionaries, key);
    Py_DECREF(key);
    if (capsule == NULL || !PyCapsule_IsValid(capsule, PREPARED_NAME)) return NULL;
    prepared_dictionary *prepared = PyCapsule_GetPointer(capsule, PREPARED_NAME);
    if (prepared->id != id) return NULL;
    unsigned long long size = zstd.getFrameContentSize(frame, length);
    if (size == ZSTD_CONTENTSIZE_UNKNOWN || size == ZSTD_CONTENTSIZE_ERROR || size > limit) return NULL;
    if (zstd.findFrameCompressedSize(frame, length) != length) return NULL; /* one frame, whole, nothing after */
    PyObject *value = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (value == NULL) return NULL;
    size_t made = zstd.decompress_usingDDict(dctx, PyBytes_AS_STRING(value), (size_t)size, frame, length,
                                             prepared->ddict);
    if (zstd.isError(made) || made != size) {
        Py_DECREF(value);
        return NULL;
    }
    return value;
}
