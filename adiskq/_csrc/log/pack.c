/* push_many's batch packed: its records encoded into one buffer (the bytes .data gets) with the
 * batch's .index, .timeindex, .keyindex and .tagindex entries beside it, in one call and with no
 * Python object a record: an EncodedRun (adiskq/_sansio/entries.py), which the write places with
 * place_entries (run_entries.c). For a stream of one partition that stores values as they are (no
 * compression): every record goes to partition 0. adiskq/_sansio/core.py's reference_pack_records
 * is the reference.
 *
 * Why: a bytes object a record (its allocation, its header, its freeing) and the join that copied
 * them into one buffer for the .data write were a third of push_many's own work a record. */
#include "../core.h"

/* What the first pass learns of a record, for the second to write it without asking again. */
typedef struct {
    long long timestamp_ns;
    uint64_t size;
    const uint8_t *key;
    size_t key_len;
    const char *tag; /* its UTF-8 (cached in the str), NULL for none */
    Py_ssize_t tag_len;
    uint8_t random_key[8]; /* the key of a record given none */
    int attributes;        /* 0, or the keyless bits of a record given no key */
} extent;

/* A push_many item's fields: an adiskq.Record's, or a value alone (bytes); 0 for anything else. */
static int item_fields(PyObject *item, PyObject **value, PyObject **key, PyObject **headers, PyObject **stamp,
                       PyObject **tag) {
    *key = *headers = *stamp = *tag = Py_None;
    if (PyBytes_CheckExact(item)) {
        *value = item;
        return 1;
    }
    if (Py_TYPE(item) != adq_record_type || PyTuple_GET_SIZE(item) != 5) return 0;
    *value = PyTuple_GET_ITEM(item, 0);
    *key = PyTuple_GET_ITEM(item, 1);
    *headers = PyTuple_GET_ITEM(item, 2);
    *stamp = PyTuple_GET_ITEM(item, 3);
    *tag = PyTuple_GET_ITEM(item, 4);
    return 1;
}

/* pack_records(items, now, max_total[, keyless]) -> (data, index, timeindex, keyindex, tagindex, largest)
 *                                        | None | NotImplemented
 * `items`: a list of adiskq.Record or bytes (a value alone); a missing timestamp is `now`, a missing
 * key 8 random bytes (as encode_records gives; its attributes `keyless`, adq_keyless_bits). `data`:
 * the records, encoded as encode_record does (attributes 0), one after the other. `index`: one entry a record (offset | position | size, u64
 * each) and `timeindex` (offset | timestamp_ns), counted from offset 0 and position 0 (place_entries
 * moves them to where the batch is written). `keyindex`: the CRC-32 of each key, u32 little-endian
 * (the key index's column); `tagindex`: the tag column (log/tags.c), or b"" when no record carries a
 * tag (the segment then writes a "no tag" entry a record, and place_entries checks no column).
 * `largest`: the largest record's size.
 * None when the records take more than `max_total` bytes in all (decided before anything is built:
 * the caller writes such a batch another way); NotImplemented for anything encode_records would not
 * take (the producer's other paths then encode it, or raise the reference's error). */
PyObject *adq_py_pack_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 3 && nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "pack_records takes 3 or 4 arguments");
        return NULL;
    }
    int keyless = adq_keyless_bits(nargs == 4 ? args[3] : NULL);
    if (keyless < 0) return NULL;
    long long max_total = PyLong_AsLongLong(args[2]);
    if (max_total == -1 && PyErr_Occurred()) return NULL;
    if (max_total < 0) {
        PyErr_SetString(PyExc_ValueError, "pack_records: max_total is 0 or more");
        return NULL;
    }
    PyObject *items = args[0], *now = args[1];
    if (!PyList_CheckExact(items) || !PyLong_CheckExact(now) || adq_record_type == NULL) Py_RETURN_NOTIMPLEMENTED;
    Py_ssize_t count = PyList_GET_SIZE(items);
    if ((size_t)count > PY_SSIZE_T_MAX / (ADQ_INDEX_ENTRY_BYTES + sizeof(extent))) return PyErr_NoMemory();
    extent *extents = PyMem_Malloc(count > 0 ? (size_t)count * sizeof(extent) : 1);
    if (extents == NULL) return PyErr_NoMemory();
    PyObject *result = NULL, *data = NULL, *index = NULL, *timeindex = NULL, *keyindex = NULL, *tagindex = NULL;
    long long now_ns = 0;
    int now_fits = adq_timestamp_of(now, &now_ns);
    uint64_t total = 0, largest = 0;
    int any_tag = 0;
    /* First pass: each record's fields checked and its size counted; nothing allocated (so no
     * collection of the cyclic GC, and no Python code, runs between the passes). */
    for (Py_ssize_t i = 0; i < count; i++) {
        extent *e = &extents[i];
        PyObject *value, *key, *headers, *stamp, *tag;
        if (!item_fields(PyList_GET_ITEM(items, i), &value, &key, &headers, &stamp, &tag)) goto not_plain;
        if (stamp == Py_None) {
            if (!now_fits) goto not_plain;
            e->timestamp_ns = now_ns;
        } else if (!adq_timestamp_of(stamp, &e->timestamp_ns)) {
            goto not_plain;
        }
        e->attributes = 0;
        if (key == Py_None) {
            adq_store_u64(e->random_key, adq_next_random());
            e->key = e->random_key;
            e->key_len = 8;
            e->attributes = keyless;
        } else if (!adq_key_bytes(key, &e->key, &e->key_len)) {
            goto not_plain;
        }
        e->size = adq_record_size(value, e->key_len, headers, tag, &e->tag, &e->tag_len);
        if (e->size == 0) goto not_plain;
        any_tag |= e->tag != NULL;
        total += e->size;
        if (total > (uint64_t)max_total) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        if (e->size > largest) largest = e->size;
    }
    data = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    index = PyBytes_FromStringAndSize(NULL, count * ADQ_INDEX_ENTRY_BYTES);
    timeindex = PyBytes_FromStringAndSize(NULL, count * ADQ_TIMEINDEX_ENTRY_BYTES);
    keyindex = PyBytes_FromStringAndSize(NULL, count * ADQ_KEY_ENTRY_BYTES);
    tagindex = PyBytes_FromStringAndSize(NULL, any_tag ? count * ADQ_TAG_ENTRY_BYTES : 0);
    if (data == NULL || index == NULL || timeindex == NULL || keyindex == NULL || tagindex == NULL) goto done;
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(data);
    uint8_t *index_at = (uint8_t *)PyBytes_AS_STRING(index), *time_at = (uint8_t *)PyBytes_AS_STRING(timeindex);
    uint8_t *key_at = (uint8_t *)PyBytes_AS_STRING(keyindex);
    uint8_t *tag_at = any_tag ? (uint8_t *)PyBytes_AS_STRING(tagindex) : NULL;
    uint64_t position = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        const extent *e = &extents[i];
        PyObject *value, *key, *headers, *stamp, *tag;
        if (!item_fields(PyList_GET_ITEM(items, i), &value, &key, &headers, &stamp, &tag))
            goto not_plain; /* never: the first pass took it, and no Python code ran since */
        adq_write_record(out + position, e->size, value, e->key, e->key_len, e->timestamp_ns, headers, e->attributes,
                         e->tag, e->tag_len);
        adq_store_u64(index_at, (uint64_t)i);
        adq_store_u64(index_at + 8, position);
        adq_store_u64(index_at + 16, e->size);
        adq_store_u64(time_at, (uint64_t)i);
        adq_store_u64(time_at + 8, (uint64_t)e->timestamp_ns);
        adq_store_u32(key_at, adq_crc32(0, e->key, e->key_len));
        if (tag_at != NULL) {
            uint32_t tag_hash = 0;
            if (e->tag != NULL) {
                tag_hash = adq_crc32(0, (const uint8_t *)e->tag, (size_t)e->tag_len);
                if (tag_hash == 0) tag_hash = 1; /* 0 is a record without a tag */
            }
            adq_store_u32(tag_at, tag_hash);
            tag_at += ADQ_TAG_ENTRY_BYTES;
        }
        position += e->size;
        index_at += ADQ_INDEX_ENTRY_BYTES;
        time_at += ADQ_TIMEINDEX_ENTRY_BYTES;
        key_at += ADQ_KEY_ENTRY_BYTES;
    }
    result = Py_BuildValue("(OOOOOK)", data, index, timeindex, keyindex, tagindex, (unsigned long long)largest);
    goto done;
not_plain:
    result = Py_NewRef(Py_NotImplemented);
done:
    PyMem_Free(extents);
    Py_XDECREF(data);
    Py_XDECREF(index);
    Py_XDECREF(timeindex);
    Py_XDECREF(keyindex);
    Py_XDECREF(tagindex);
    return result;
}
