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
 * GIL held.
 *
 * A record stores its frame without zstd's 4-byte magic number (compression.py): compress drops the
 * magic libzstd writes, and decompress puts it back in front (a copy of a few dozen bytes) so that
 * only stable functions are called, rather than the experimental ZSTD_d_format parameter. The frame's
 * header and block headers are read here, once (read_frame), which also proves it one whole frame.
 *
 * Values are compressed with ZSTD_compress_usingCDict. Measured under callgrind on 263-byte JSON
 * values with a 16 KiB dictionary (libzstd 1.5.4), its other ways cost more, not less: a context given
 * the dictionary with ZSTD_CCtx_refCDict and ZSTD_compress2 (with ZSTD_c_forceAttachDict, which
 * changes nothing: a small input attaches the dictionary already), 10,950 instructions a value against
 * 10,360; small-input parameters given with ZSTD_CCtx_loadDictionary, about 12,100. No level from -5
 * to 4 costs much less (8,600 to 10,400) without frames growing (level 1: 0.3 bytes smaller, 4% fewer
 * instructions; -1: 13 bytes larger), and levels 5 and up cost two to sixty times more for no smaller
 * frames. Its per-frame cost is the block's match search and entropy coding, not table resets. */
#include <dlfcn.h>

#include "../core.h"

typedef struct ZSTD_DCtx_s ZSTD_DCtx;
typedef struct ZSTD_CCtx_s ZSTD_CCtx;
typedef struct ZSTD_DDict_s ZSTD_DDict;
typedef struct ZSTD_CDict_s ZSTD_CDict;

static struct {
    unsigned (*isError)(size_t);
    ZSTD_DCtx *(*createDCtx)(void);
    ZSTD_CCtx *(*createCCtx)(void);
    ZSTD_DDict *(*createDDict)(const void *, size_t);
    size_t (*freeDDict)(ZSTD_DDict *);
    ZSTD_CDict *(*createCDict)(const void *, size_t, int);
    size_t (*freeCDict)(ZSTD_CDict *);
    unsigned (*getDictID_fromDict)(const void *, size_t);
    size_t (*decompress_usingDDict)(ZSTD_DCtx *, void *, size_t, const void *, size_t, const ZSTD_DDict *);
    size_t (*compress_usingCDict)(ZSTD_CCtx *, void *, size_t, const void *, size_t, const ZSTD_CDict *);
    size_t (*compressBound)(size_t);
    size_t (*decompressDCtx)(ZSTD_DCtx *, void *, size_t, const void *, size_t);
    size_t (*compressCCtx)(ZSTD_CCtx *, void *, size_t, const void *, size_t, int);
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
    ZSTD_SYMBOL(decompress_usingDDict, "ZSTD_decompress_usingDDict")
    ZSTD_SYMBOL(compress_usingCDict, "ZSTD_compress_usingCDict")
    ZSTD_SYMBOL(compressBound, "ZSTD_compressBound")
    ZSTD_SYMBOL(decompressDCtx, "ZSTD_decompressDCtx")
    ZSTD_SYMBOL(compressCCtx, "ZSTD_compressCCtx")
#undef ZSTD_SYMBOL
    dctx = zstd.createDCtx();
    cctx = zstd.createCCtx();
    if (dctx == NULL || cctx == NULL) return -1;
    zstd_state = 1;
    return 1;
}

#define PREPARED_NAME "adiskq.zstd_dictionary"

/* A prepared dictionary, or the "plain" one (id 0, no DDict or CDict): zstd with no dictionary at
 * `level`, what a stream compresses with until its first dictionary exists. */
typedef struct {
    ZSTD_DDict *ddict;
    ZSTD_CDict *cdict;
    unsigned id;
    int level;
} prepared_dictionary;

static void prepared_free(PyObject *capsule) {
    prepared_dictionary *prepared = PyCapsule_GetPointer(capsule, PREPARED_NAME);
    if (prepared == NULL) return;
    zstd.freeDDict(prepared->ddict);
    zstd.freeCDict(prepared->cdict);
    PyMem_Free(prepared);
}

/* zstd_prepare(dictionary: bytes | None, level: int) -> capsule, or None where libzstd cannot be
 * loaded. ValueError when the bytes are not a zstd dictionary with an id (what the reference checks
 * first). None for the dictionary prepares plain zstd: frames that name no dictionary. */
PyObject *adq_py_zstd_prepare(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2 || !(PyBytes_Check(args[0]) || args[0] == Py_None) || !PyLong_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "zstd_prepare(dictionary: bytes | None, level: int)");
        return NULL;
    }
    long level = PyLong_AsLong(args[1]);
    if (level == -1 && PyErr_Occurred()) return NULL;
    if (level < -7 || level > 22) {
        PyErr_SetString(PyExc_ValueError, "zstd levels run from -7 to 22");
        return NULL;
    }
    if (load_zstd() < 0) Py_RETURN_NONE;
    if (args[0] == Py_None) {
        prepared_dictionary *plain = PyMem_Calloc(1, sizeof(prepared_dictionary));
        if (plain == NULL) return PyErr_NoMemory();
        plain->level = (int)level;
        PyObject *capsule = PyCapsule_New(plain, PREPARED_NAME, prepared_free);
        if (capsule == NULL) PyMem_Free(plain);
        return capsule;
    }
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
    prepared->level = (int)level;
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

/* A scratch buffer kept between calls (used with the GIL held): compress writes a frame there before
 * the value's bytes are made at their size, and decompress puts the magic number back in front of a
 * stored frame there. Buffers over SCRATCH_KEPT bytes are freed after the call. */
#define SCRATCH_KEPT 65536
static uint8_t *scratch = NULL;
static size_t scratch_size = 0;

static uint8_t *scratch_of(size_t size) {
    if (size <= scratch_size) return scratch;
    uint8_t *grown = PyMem_Realloc(scratch, size);
    if (grown == NULL) return NULL;
    scratch = grown;
    scratch_size = size;
    return scratch;
}

static void scratch_trim(void) {
    if (scratch_size > SCRATCH_KEPT) {
        PyMem_Free(scratch);
        scratch = NULL;
        scratch_size = 0;
    }
}

static const uint8_t frame_magic[4] = {0x28, 0xB5, 0x2F, 0xFD}; /* 0xFD2FB528, little-endian */

/* zstd_compress(prepared, value: bytes) -> bytes: one frame stating its content size and the
 * dictionary's id, without a checksum (the record's CRC-32C covers it), stored without its 4-byte
 * magic number (the record's attributes already say it is a frame). */
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
    uint8_t *out = scratch_of(bound);
    if (out == NULL) return PyErr_NoMemory();
    size_t written = prepared->cdict == NULL /* plain zstd: the frame names no dictionary */
                         ? zstd.compressCCtx(cctx, out, bound, PyBytes_AS_STRING(value), length, prepared->level)
                         : zstd.compress_usingCDict(cctx, out, bound, PyBytes_AS_STRING(value), length,
                                                    prepared->cdict);
    PyObject *frame = NULL;
    if (zstd.isError(written) || written < sizeof frame_magic || memcmp(out, frame_magic, sizeof frame_magic))
        PyErr_SetString(PyExc_ValueError, "libzstd could not compress the value");
    else
        frame = PyBytes_FromStringAndSize((const char *)out + sizeof frame_magic,
                                          (Py_ssize_t)(written - sizeof frame_magic));
    scratch_trim();
    return frame;
}

/* What a stored frame (RFC 8878 without its magic number) says of itself, read from its header and
 * block headers: 1 when it is one whole frame that names a dictionary and states its content size,
 * its blocks (and checksum, when it has one) ending exactly where the value ends; 0 otherwise. The
 * reference's read_frame (compression.py) makes the same checks. */
static int read_frame(const uint8_t *frame, size_t length, unsigned *id, unsigned long long *size) {
    static const uint8_t id_bytes[4] = {0, 1, 2, 4};
    if (length < 1) return 0;
    unsigned descriptor = frame[0];
    if (descriptor & 0x08) return 0; /* the reserved bit */
    unsigned single_segment = (descriptor >> 5) & 1, size_flag = descriptor >> 6;
    size_t size_bytes = size_flag == 0 ? single_segment : (size_t)1 << size_flag;
    size_t at = 2 - single_segment; /* the descriptor, and the window descriptor unless single segment */
    size_t id_length = id_bytes[descriptor & 3];
    if (size_bytes == 0 || length < at + id_length + size_bytes) return 0;
    *id = 0;
    for (size_t i = 0; i < id_length; i++) *id |= (unsigned)frame[at + i] << (8 * i);
    at += id_length;
    *size = 0;
    for (size_t i = 0; i < size_bytes; i++) *size |= (unsigned long long)frame[at + i] << (8 * i);
    if (size_bytes == 2) *size += 256;
    at += size_bytes;
    for (;;) {
        if (length - at < 3) return 0;
        uint32_t header = (uint32_t)frame[at] | (uint32_t)frame[at + 1] << 8 | (uint32_t)frame[at + 2] << 16;
        at += 3;
        unsigned type = (header >> 1) & 3;
        size_t stored = type == 1 ? 1 : header >> 3; /* an RLE block stores one byte */
        if (type == 3 || length - at < stored) return 0;
        at += stored;
        if (header & 1) break; /* the last block */
    }
    if (descriptor & 0x04) { /* a content checksum */
        if (length - at < 4) return 0;
        at += 4;
    }
    return at == length;
}

/* The value a record's frame holds, or NULL without an exception set when the frame is not one whole
 * frame of this stream's dictionaries (or of plain zstd: one that names no dictionary) stating a
 * content size of at most `limit` and holding exactly that many bytes (the caller lets the reference
 * name what is wrong). NULL with an exception set is an allocation failure. `dictionaries` maps
 * dictionary ids to prepared dictionaries (a dict), or is NULL (a reader given none reads no
 * compressed value); `last` keeps the one found last, for the records after it in the same call. */
PyObject *adq_zstd_decompress(const uint8_t *frame, size_t length, PyObject *dictionaries, size_t limit,
                              adq_zstd_last *last) {
    if (dictionaries == NULL || load_zstd() != 1) return NULL;
    unsigned id;
    unsigned long long size;
    if (!read_frame(frame, length, &id, &size) || size > limit) return NULL;
    prepared_dictionary *prepared = last->prepared;
    if (id == 0) {
        prepared = NULL; /* plain zstd: no dictionary to find */
    } else if (prepared == NULL || last->id != id) {
        PyObject *key = PyLong_FromUnsignedLong(id);
        if (key == NULL) return NULL;
        PyObject *capsule = PyDict_GetItemWithError(dictionaries, key);
        Py_DECREF(key);
        if (capsule == NULL || !PyCapsule_IsValid(capsule, PREPARED_NAME)) return NULL;
        prepared = PyCapsule_GetPointer(capsule, PREPARED_NAME);
        if (prepared->id != id) return NULL;
        last->id = id;
        last->prepared = prepared;
    }
    uint8_t *whole = scratch_of(sizeof frame_magic + length);
    if (whole == NULL) return PyErr_NoMemory();
    memcpy(whole, frame_magic, sizeof frame_magic);
    memcpy(whole + sizeof frame_magic, frame, length);
    PyObject *value = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (value != NULL) {
        size_t made = prepared == NULL ? zstd.decompressDCtx(dctx, PyBytes_AS_STRING(value), (size_t)size, whole,
                                                             sizeof frame_magic + length)
                                       : zstd.decompress_usingDDict(dctx, PyBytes_AS_STRING(value), (size_t)size,
                                                                    whole, sizeof frame_magic + length, prepared->ddict);
        if (zstd.isError(made) || made != size) Py_CLEAR(value);
    }
    scratch_trim();
    return value;
}
