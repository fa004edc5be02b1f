/* The sealed key index's sorted column (adiskq/_sansio/keyindex.py documents the format and holds
 * the reference, sealed_tail): each entry's value (the top hash_bits of its hash, then its block
 * number in block_bits) in ascending order, each value once when `unique`. A roll builds it for the
 * whole segment; the reference's sorted() of a quarter of a million Python ints held the producer's
 * push for 40 ms a roll, where these three counting passes take a millisecond. */
#include "../core.h"

#define RADIX_BITS 10
#define RADIX (1u << RADIX_BITS)
#define VALUE_BITS 30 /* hash_bits + block_bits, always (keyindex._SORT_BITS) */

/* One stable counting pass: `from` sorted by the RADIX_BITS bits at `shift` into `to`. */
static void counting_pass(const uint32_t *from, uint32_t *to, size_t count, unsigned shift) {
    size_t starts[RADIX] = {0};
    for (size_t i = 0; i < count; i++) starts[(from[i] >> shift) & (RADIX - 1)]++;
    size_t total = 0;
    for (unsigned digit = 0; digit < RADIX; digit++) {
        size_t here = starts[digit];
        starts[digit] = total;
        total += here;
    }
    for (size_t i = 0; i < count; i++) to[starts[(from[i] >> shift) & (RADIX - 1)]++] = from[i];
}

/* sorted_key_values(column, hash_bits, block_bits, block_shift, unique) -> bytes of u32 LE values,
 * or NotImplemented for a layout outside the format (the reference then raises or copes). */
PyObject *adq_py_sorted_key_values(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "sorted_key_values(column, hash_bits, block_bits, block_shift, unique)");
        return NULL;
    }
    long hash_bits = PyLong_AsLong(args[1]);
    long block_bits = PyLong_AsLong(args[2]);
    long block_shift = PyLong_AsLong(args[3]);
    int unique = PyObject_IsTrue(args[4]);
    if (PyErr_Occurred() || unique < 0) return NULL;
    /* Each bounded before they are summed: a hostile hash_bits near LONG_MAX must not overflow. */
    if (hash_bits < 1 || hash_bits > VALUE_BITS || block_bits < 0 || block_bits > VALUE_BITS ||
        hash_bits + block_bits != VALUE_BITS || block_shift < 0 || block_shift > 62)
        Py_RETURN_NOTIMPLEMENTED;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    size_t count = (size_t)view.len / 4;
    if (count > 0 && ((count - 1) >> block_shift) >> block_bits != 0) { /* more blocks than block_bits hold */
        PyBuffer_Release(&view);
        Py_RETURN_NOTIMPLEMENTED;
    }
    uint32_t *values = PyMem_Malloc(2 * (count ? count : 1) * sizeof(uint32_t));
    if (values == NULL) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    uint32_t *scratch = values + count;
    const uint8_t *column = view.buf;
    for (size_t i = 0; i < count; i++) {
        uint32_t top = adq_load_u32(column + 4 * i) >> (32 - hash_bits);
        values[i] = (uint32_t)((top << block_bits) | (uint32_t)(i >> block_shift));
    }
    PyBuffer_Release(&view);
    counting_pass(values, scratch, count, 0);
    counting_pass(scratch, values, count, RADIX_BITS);
    counting_pass(values, scratch, count, 2 * RADIX_BITS);
    size_t kept = 0;
    for (size_t i = 0; i < count; i++)
        if (!unique || kept == 0 || scratch[i] != scratch[kept - 1]) scratch[kept++] = scratch[i];
    PyObject *packed = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(kept * 4));
    if (packed != NULL) {
        uint8_t *out = (uint8_t *)PyBytes_AS_STRING(packed);
        for (size_t i = 0; i < kept; i++) adq_store_u32(out + 4 * i, scratch[i]);
    }
    PyMem_Free(values);
    return packed;
}
