/* Records from values, keys, timestamps and headers: the reference's encode_record and encode_batch,
 * plus encode_records (push_many's batch: keys placed on partitions and hashed for the key index in
 * the same loop), receipts, place (one push's key), encode_push (one push's key placed and its record
 * encoded in one call) and index_entries (a batch's .index and .timeindex entries).
 *
 * Anything these do not take plainly (a value that is not bytes, a timestamp out of range, headers
 * that are not a dict of str to bytes, too many of them...) makes them return NotImplemented: the
 * caller (adiskq/_sansio/core.py) then runs the reference, which encodes it or raises its error. So
 * errors are the reference's by construction, and this file holds only the fast path. */
#include "../core.h"

#define MAX_U32 0xFFFFFFFFull

/* The bytes headers take in a record (header_count included), or -1 when they are not plain. */
static int64_t headers_size(PyObject *headers) {
    if (headers == Py_None) return 2;
    if (!PyDict_CheckExact(headers)) return -1;
    Py_ssize_t count = PyDict_GET_SIZE(headers);
    if (count > 0xFFFF) return -1;
    int64_t size = 2;
    Py_ssize_t i = 0;
    PyObject *name, *value;
    while (PyDict_Next(headers, &i, &name, &value)) {
        if (!PyUnicode_CheckExact(name) || !PyBytes_CheckExact(value)) return -1;
        Py_ssize_t name_len;
        if (PyUnicode_AsUTF8AndSize(name, &name_len) == NULL) {
            PyErr_Clear(); /* a lone surrogate: the reference raises its own error */
            return -1;
        }
        if (name_len > 0xFFFF || PyBytes_GET_SIZE(value) > (Py_ssize_t)MAX_U32) return -1;
        size += 6 + name_len + PyBytes_GET_SIZE(value);
    }
    return size;
}

static inline __attribute__((always_inline)) uint8_t *write_headers(uint8_t *out, PyObject *headers) {
    if (headers == Py_None || PyDict_GET_SIZE(headers) == 0) {
        adq_store_u16(out, 0);
        return out + 2;
    }
    adq_store_u16(out, (uint16_t)PyDict_GET_SIZE(headers));
    out += 2;
    Py_ssize_t i = 0;
    PyObject *name, *value;
    while (PyDict_Next(headers, &i, &name, &value)) {
        Py_ssize_t name_len, value_len = PyBytes_GET_SIZE(value);
        const char *raw = PyUnicode_AsUTF8AndSize(name, &name_len); /* cached by headers_size */
        adq_store_u16(out, (uint16_t)name_len);
        memcpy(out + 2, raw, (size_t)name_len);
        out += 2 + name_len;
        adq_store_u32(out, (uint32_t)value_len);
        memcpy(out + 4, PyBytes_AS_STRING(value), (size_t)value_len);
        out += 4 + value_len;
    }
    return out;
}

/* A tag's UTF-8 bytes (cached in the str) in *raw and *length: 1 for None (length 0), 1 for a plain
 * tag (a str of 1 to ADQ_MAX_TAG_BYTES bytes of UTF-8), 0 for anything else (the reference raises). */
static int tag_bytes(PyObject *tag, const char **raw, Py_ssize_t *length) {
    *raw = NULL;
    *length = 0;
    if (tag == Py_None) return 1;
    if (!PyUnicode_CheckExact(tag)) return 0;
    *raw = PyUnicode_AsUTF8AndSize(tag, length);
    if (*raw == NULL) {
        PyErr_Clear(); /* a lone surrogate: the reference raises its own error */
        return 0;
    }
    return *length >= 1 && *length <= ADQ_MAX_TAG_BYTES;
}

/* A timestamp as an i64 in *timestamp_ns: 1 for an int that fits, 0 for anything else (the
 * reference takes it, or raises its own error). */
static int timestamp_of(PyObject *timestamp, long long *timestamp_ns) {
    if (!PyLong_CheckExact(timestamp)) return 0;
    int overflow;
    *timestamp_ns = PyLong_AsLongLongAndOverflow(timestamp, &overflow);
    if (overflow || (*timestamp_ns == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* The bytes one record takes, or 0 when it is not plain ("use the reference"; no exception set): its
 * value is not bytes, its tag or headers are not plain, or it is over 4 GiB. *raw_tag and *tag_len
 * are the tag's UTF-8 (NULL for None), for adq_write_record. */
/* Inlined always, as encode_at's body was before log/pack.c shared it: a push felt the calls. */
static inline __attribute__((always_inline)) uint64_t record_size(PyObject *value, size_t key_len, PyObject *headers,
                                                                 PyObject *tag, const char **raw_tag,
                                                                 Py_ssize_t *tag_len) {
    if (!PyBytes_CheckExact(value)) return 0;
    if (!tag_bytes(tag, raw_tag, tag_len)) return 0;
    int64_t header_bytes = headers == Py_None ? 2 : headers_size(headers); /* most records have none */
    if (header_bytes < 0) return 0;
    uint64_t tag_field = *raw_tag == NULL ? 0 : 2 + (uint64_t)*tag_len;
    uint64_t size =
        ADQ_KEY_AT + (uint64_t)key_len + tag_field + (uint64_t)header_bytes + (uint64_t)PyBytes_GET_SIZE(value);
    if (size > MAX_U32 || key_len > MAX_U32) return 0;
    return size;
}

/* One record of `size` bytes (adq_record_size's, for these same fields) written at `out`, its CRC-32C
 * last. */
static inline __attribute__((always_inline)) void write_record(uint8_t *out, uint64_t size, PyObject *value,
                                                             const uint8_t *key, size_t key_len,
                                                             long long timestamp_ns, PyObject *headers,
                                                             int attributes, const char *raw_tag, Py_ssize_t tag_len) {
    adq_store_u32(out + ADQ_SIZE_AT, (uint32_t)size);
    out[ADQ_MAGIC_AT] = ADQ_MAGIC_V1;
    out[ADQ_ATTRIBUTES_AT] = (uint8_t)(raw_tag == NULL ? attributes : (attributes | (int)ADQ_TAGGED));
    adq_store_u64(out + ADQ_TIMESTAMP_AT, (uint64_t)timestamp_ns);
    adq_store_u32(out + ADQ_KEY_LENGTH_AT, (uint32_t)key_len);
    memcpy(out + ADQ_KEY_AT, key, key_len);
    uint8_t *at = out + ADQ_KEY_AT + key_len;
    if (raw_tag != NULL) {
        adq_store_u16(at, (uint16_t)tag_len);
        memcpy(at + 2, raw_tag, (size_t)tag_len);
        at += 2 + tag_len;
    }
    at = write_headers(at, headers);
    memcpy(at, PyBytes_AS_STRING(value), (size_t)PyBytes_GET_SIZE(value));
    adq_store_u32(out + ADQ_CRC_AT, adq_crc32c(0, out + ADQ_MAGIC_AT, (size_t)size - ADQ_MAGIC_AT));
}

/* One record as a new bytes object, its timestamp already an i64; NULL with no exception set means
 * "not plain: use the reference". `tag` is None or a str: a tagged record sets attributes bit 0 and
 * carries u16 tag_len and the tag right after the key. */
static PyObject *encode_at(PyObject *value, const uint8_t *key, size_t key_len, long long timestamp_ns,
                           PyObject *headers, int attributes, PyObject *tag) {
    const char *raw_tag;
    Py_ssize_t tag_len;
    uint64_t size = record_size(value, key_len, headers, tag, &raw_tag, &tag_len);
    if (size == 0) return NULL;
    PyObject *record = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (record == NULL) return NULL;
    write_record((uint8_t *)PyBytes_AS_STRING(record), size, value, key, key_len, timestamp_ns, headers,
                     attributes, raw_tag, tag_len);
    return record;
}

/* encode_at with the timestamp as the Python int it was given. */
static PyObject *encode_one(PyObject *value, const uint8_t *key, size_t key_len, PyObject *timestamp,
                            PyObject *headers, int attributes, PyObject *tag) {
    long long timestamp_ns;
    if (!PyBytes_CheckExact(value) || !timestamp_of(timestamp, &timestamp_ns)) return NULL;
    return encode_at(value, key, key_len, timestamp_ns, headers, attributes, tag);
}

/* A key's bytes: a bytes object's own, or a str's UTF-8 (cached in the str); 0 when not plain. */
static int key_bytes(PyObject *key, const uint8_t **raw, size_t *length) {
    Py_ssize_t n;
    if (PyBytes_CheckExact(key)) {
        *raw = (const uint8_t *)PyBytes_AS_STRING(key);
        *length = (size_t)PyBytes_GET_SIZE(key);
        return 1;
    }
    if (PyUnicode_CheckExact(key)) {
        if (PyUnicode_IS_COMPACT_ASCII(key)) { /* most keys: the characters are the UTF-8, no call to ask */
            *raw = (const uint8_t *)PyUnicode_DATA(key);
            *length = (size_t)PyUnicode_GET_LENGTH(key);
            return 1;
        }
        const char *text = PyUnicode_AsUTF8AndSize(key, &n);
        if (text == NULL) {
            PyErr_Clear();
            return 0;
        }
        *raw = (const uint8_t *)text;
        *length = (size_t)n;
        return 1;
    }
    return 0;
}

static PyObject *not_implemented(void) { Py_RETURN_NOTIMPLEMENTED; }

/* A key's partition: FNV-1 32 of its bytes modulo the count (0 without hashing when there is one). */
static unsigned long partition_of(const uint8_t *key, size_t key_len, long partition_count) {
    return partition_count == 1 ? 0 : adq_fnv1_32(key, key_len) % (unsigned long)partition_count;
}

/* encode_record(value, key, timestamp_ns, headers, attributes, tag) -> bytes | NotImplemented */
PyObject *adq_py_encode_record(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "encode_record takes 6 arguments");
        return NULL;
    }
    if (!PyBytes_CheckExact(args[1]) || !PyLong_CheckExact(args[4])) return not_implemented();
    long attributes = PyLong_AsLong(args[4]);
    /* Bits 2 and 3 come with a transaction's fields, which only the reference writes. */
    if (attributes < 0 || attributes > 255 || attributes & (ADQ_TRANSACTIONAL | ADQ_CONTROL | ADQ_RESERVED)) {
        PyErr_Clear();
        return not_implemented();
    }
    PyObject *record = encode_one(args[0], (const uint8_t *)PyBytes_AS_STRING(args[1]),
                                  (size_t)PyBytes_GET_SIZE(args[1]), args[2], args[3], (int)attributes, args[5]);
    if (record == NULL && !PyErr_Occurred()) return not_implemented();
    return record;
}

/* Sequences of one length as fast sequences (new references), or 0 when they are not. */
static int same_length_sequences(PyObject *const *in, PyObject **out, int n, Py_ssize_t *length) {
    for (int i = 0; i < n; i++) out[i] = NULL;
    for (int i = 0; i < n; i++) {
        if (!PyList_CheckExact(in[i]) && !PyTuple_CheckExact(in[i])) goto fail;
        out[i] = Py_NewRef(in[i]);
        if (i > 0 && PySequence_Fast_GET_SIZE(out[i]) != PySequence_Fast_GET_SIZE(out[0])) goto fail;
    }
    *length = PySequence_Fast_GET_SIZE(out[0]);
    return 1;
fail:
    for (int i = 0; i < n; i++) Py_XDECREF(out[i]);
    return 0;
}

/* Whether the n sequences still hold `length` items each. Allocating a list may start a collection
 * of the cyclic GC, whose finalizers run Python code that may change a list given to us: checked
 * after the allocations, before the loop (which runs no Python code) reads the items. */
static int still_of_length(PyObject *const *sequences, int n, Py_ssize_t length) {
    for (int i = 0; i < n; i++)
        if (PySequence_Fast_GET_SIZE(sequences[i]) != length) return 0;
    return 1;
}

/* encode_batch(values, keys, timestamps, headers, tags) -> list[bytes] | NotImplemented; the sequences
 * are lists or tuples (anything else goes to the reference), headers and tags None or one per record. */
PyObject *adq_py_encode_batch(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "encode_batch takes 5 arguments");
        return NULL;
    }
    PyObject *in[5] = {args[0], args[1], args[2], args[3], args[4]};
    PyObject *seq[5] = {NULL, NULL, NULL, NULL, NULL};
    Py_ssize_t count;
    int with_headers = args[3] != Py_None, with_tags = args[4] != Py_None;
    /* the sequences present, packed: values, keys, timestamps, [headers], [tags] */
    int n = 3;
    int headers_at = -1, tags_at = -1;
    if (with_headers) in[headers_at = n++] = args[3];
    if (with_tags) in[tags_at = n++] = args[4];
    if (!same_length_sequences(in, seq, n, &count)) return not_implemented();
    PyObject *records = PyList_New(count);
    if (records == NULL) goto done;
    if (!still_of_length(seq, n, count)) goto reference;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *key = PySequence_Fast_GET_ITEM(seq[1], i);
        if (!PyBytes_CheckExact(key)) goto reference;
        PyObject *headers = with_headers ? PySequence_Fast_GET_ITEM(seq[headers_at], i) : Py_None;
        PyObject *tag = with_tags ? PySequence_Fast_GET_ITEM(seq[tags_at], i) : Py_None;
        PyObject *record = encode_one(PySequence_Fast_GET_ITEM(seq[0], i), (const uint8_t *)PyBytes_AS_STRING(key),
                                      (size_t)PyBytes_GET_SIZE(key), PySequence_Fast_GET_ITEM(seq[2], i), headers, 0,
                                      tag);
        if (record == NULL) {
            if (PyErr_Occurred()) goto failed;
            goto reference;
        }
        PyList_SET_ITEM(records, i, record);
    }
    goto done;
reference:
    Py_DECREF(records);
    records = not_implemented();
    goto done;
failed:
    Py_CLEAR(records);
done:
    for (int i = 0; i < n; i++) Py_DECREF(seq[i]);
    return records;
}

/* place(key, partition_count) -> (key bytes, partition, key hash) | NotImplemented: one push's key. */
PyObject *adq_py_place(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "place takes 2 arguments");
        return NULL;
    }
    long partition_count = PyLong_AsLong(args[1]);
    if (partition_count <= 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "partition_count must be positive");
        return NULL;
    }
    const uint8_t *key;
    size_t key_len;
    if (!key_bytes(args[0], &key, &key_len)) return not_implemented();
    PyObject *raw = PyBytes_CheckExact(args[0]) ? Py_NewRef(args[0])
                                                 : PyBytes_FromStringAndSize((const char *)key, (Py_ssize_t)key_len);
    if (raw == NULL) return NULL;
    /* A tuple filled by hand: Py_BuildValue parses its format on every call, which cost more than the hashes. */
    PyObject *partition = PyLong_FromUnsignedLong(partition_of(key, key_len, partition_count));
    PyObject *hash = PyLong_FromUnsignedLong(adq_crc32(0, key, key_len));
    PyObject *result = partition != NULL && hash != NULL ? PyTuple_New(3) : NULL;
    if (result == NULL) {
        Py_DECREF(raw);
        Py_XDECREF(partition);
        Py_XDECREF(hash);
        return NULL;
    }
    PyTuple_SET_ITEM(result, 0, raw);
    PyTuple_SET_ITEM(result, 1, partition);
    PyTuple_SET_ITEM(result, 2, hash);
    return result;
}

static uint64_t next_random(void);

/* The two ints a producer passes as `keyless`, held from the module's start: a push compares its
 * argument with them before converting it (CPython keeps one object for each small int, so the
 * producer's 0 and 0x10 are these; any other int object of the same value takes the conversion). */
static PyObject *keyless_int;
static PyObject *keyed_int;

int adq_keyless_init(void) {
    keyless_int = PyLong_FromLong(ADQ_KEYLESS);
    keyed_int = PyLong_FromLong(0);
    return keyless_int == NULL || keyed_int == NULL ? -1 : 0;
}

int adq_keyless_bits(PyObject *keyless) {
    if (keyless == NULL || keyless == keyless_int) return ADQ_KEYLESS;
    if (keyless == keyed_int) return 0;
    long bits = PyLong_Check(keyless) ? PyLong_AsLong(keyless) : -1;
    if (bits == 0 || bits == ADQ_KEYLESS) return (int)bits;
    PyErr_Clear();
    PyErr_SetString(PyExc_ValueError, "keyless is 0 (a stream before format 5) or 0x10 (codec.KEYLESS)");
    return -1;
}

/* encode_push(value, key, timestamp_ns, headers, tag, partition_count, max_message_bytes[, keyless])
 *     -> (record, partition, key hash) | NotImplemented
 * One push's whole encoding: its key placed and hashed (as place() does; None is a random key, as in
 * encode_records) and its record encoded (as encode_record() does, attributes 0, or `keyless` for a
 * record given no key: adq_keyless_bits). NotImplemented for
 * anything not plain, and for a record over max_message_bytes, which is refused before a byte of it
 * is copied: the producer's Python path then encodes it, or raises the reference's error. */
PyObject *adq_py_encode_push(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 7 && nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "encode_push takes 7 or 8 arguments");
        return NULL;
    }
    int keyless = adq_keyless_bits(nargs == 8 ? args[7] : NULL);
    if (keyless < 0) return NULL;
    long partition_count = PyLong_AsLong(args[5]);
    if (partition_count <= 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "partition_count must be positive");
        return NULL;
    }
    long long max_bytes = PyLong_AsLongLong(args[6]);
    if (max_bytes == -1 && PyErr_Occurred()) return NULL;
    PyObject *value = args[0], *headers = args[3], *tag = args[4];
    const uint8_t *key;
    size_t key_len;
    uint8_t random_key[8];
    int attributes = 0;
    if (args[1] == Py_None) {
        adq_store_u64(random_key, next_random());
        key = random_key;
        key_len = 8;
        attributes = keyless;
    } else if (!key_bytes(args[1], &key, &key_len)) {
        return not_implemented();
    }
    if (!PyBytes_CheckExact(value)) return not_implemented();
    /* The size as encode_one counts it, so an oversized record is refused before it is built. */
    int64_t header_bytes = headers_size(headers);
    const char *raw_tag;
    Py_ssize_t tag_len;
    if (header_bytes < 0 || !tag_bytes(tag, &raw_tag, &tag_len)) return not_implemented();
    uint64_t size = ADQ_KEY_AT + (uint64_t)key_len + (raw_tag == NULL ? 0 : 2 + (uint64_t)tag_len) +
                    (uint64_t)header_bytes + (uint64_t)PyBytes_GET_SIZE(value);
    if (max_bytes < 0 || size > (uint64_t)max_bytes) return not_implemented();
    PyObject *record = encode_one(value, key, key_len, args[2], headers, attributes, tag);
    if (record == NULL) return PyErr_Occurred() ? NULL : not_implemented();
    PyObject *partition = PyLong_FromUnsignedLong(partition_of(key, key_len, partition_count));
    PyObject *hash = PyLong_FromUnsignedLong(adq_crc32(0, key, key_len));
    PyObject *result = partition != NULL && hash != NULL ? PyTuple_New(3) : NULL;
    if (result == NULL) {
        Py_DECREF(record);
        Py_XDECREF(partition);
        Py_XDECREF(hash);
        return NULL;
    }
    PyTuple_SET_ITEM(result, 0, record);
    PyTuple_SET_ITEM(result, 1, partition);
    PyTuple_SET_ITEM(result, 2, hash);
    return result;
}

/* index_entries(first_offset, start, records, timestamps) -> (index bytes, timeindex bytes, end):
 * a batch's .index entries (offset | position | size, u64 each) and .timeindex entries
 * (offset | timestamp_ns), from where its first record goes in .data. */
PyObject *adq_py_index_entries(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "index_entries takes 4 arguments");
        return NULL;
    }
    unsigned long long offset = PyLong_AsUnsignedLongLong(args[0]);
    unsigned long long position = PyLong_AsUnsignedLongLong(args[1]);
    if (PyErr_Occurred()) return NULL;
    PyObject *seq[2];
    Py_ssize_t count;
    if (!same_length_sequences(args + 2, seq, 2, &count)) return not_implemented();
    PyObject *result = NULL;
    PyObject *index = PyBytes_FromStringAndSize(NULL, count * ADQ_INDEX_ENTRY_BYTES);
    PyObject *timeindex = PyBytes_FromStringAndSize(NULL, count * ADQ_TIMEINDEX_ENTRY_BYTES);
    if (index == NULL || timeindex == NULL) goto done;
    uint8_t *entry = (uint8_t *)PyBytes_AS_STRING(index);
    uint8_t *time_entry = (uint8_t *)PyBytes_AS_STRING(timeindex);
    /* A batch's records mostly share one timestamp object (the call's): converted once for a run of it. */
    PyObject *converted = NULL;
    long long timestamp_ns = 0;
    for (Py_ssize_t i = 0; i < count; i++, offset++) {
        PyObject *record = PySequence_Fast_GET_ITEM(seq[0], i);
        PyObject *stamp = PySequence_Fast_GET_ITEM(seq[1], i);
        if (!PyBytes_CheckExact(record) || !PyLong_CheckExact(stamp)) {
            result = not_implemented();
            goto done;
        }
        if (stamp != converted) {
            int overflow;
            timestamp_ns = PyLong_AsLongLongAndOverflow(stamp, &overflow);
            if (overflow) {
                result = not_implemented();
                goto done;
            }
            converted = stamp; /* borrowed: the sequence holds it, and no Python code runs in this loop */
        }
        unsigned long long size = (unsigned long long)PyBytes_GET_SIZE(record);
        adq_store_u64(entry, offset);
        adq_store_u64(entry + 8, position);
        adq_store_u64(entry + 16, size);
        adq_store_u64(time_entry, offset);
        adq_store_u64(time_entry + 8, (uint64_t)timestamp_ns);
        entry += ADQ_INDEX_ENTRY_BYTES;
        time_entry += ADQ_TIMEINDEX_ENTRY_BYTES;
        position += size;
    }
    result = Py_BuildValue("(OOK)", index, timeindex, position);
done:
    Py_XDECREF(index);
    Py_XDECREF(timeindex);
    Py_DECREF(seq[0]);
    Py_DECREF(seq[1]);
    return result;
}

/* A key for a record pushed without one: 8 random bytes (splitmix64, seeded by configure()), which
 * spread such records over the partitions as go-diskq's random keys do. */
uint64_t adq_random_state;

static uint64_t next_random(void) {
    uint64_t z = (adq_random_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* encode_records(items, now, partition_count[, prepared[, keyless]]) -> (records, timestamps, partitions,
 * key_hashes, largest, total) | NotImplemented: push_many's whole per-record work in one loop.
 * key_hashes are bytes: each record's key index hash as a u32 in the host's order (what
 * array.array("I") holds; adiskq/_sansio/core.py makes it one), not a list of ints: the segment
 * writes them as the key index's column (an int a record, made here for the column's packing to take
 * apart again, was a sixth of push_many's own work). Items are adiskq.Record or bytes (a value alone); a missing timestamp is `now`, a missing key a random one
 * (its record's attributes `keyless`: adq_keyless_bits).
 * Anything else (a datetime timestamp, a bytearray value, a Mapping that is not a dict...) is
 * NotImplemented and the producer's Python path takes the batch. With `prepared` (log/compression.c's prepared
 * dictionary, or None) each value is stored compressed (attributes bit 1). `largest` is the size of
 * the largest record, counting the value uncompressed (what max_message_bytes limits); `total` the
 * records' size as stored (what the batch adds to .data: the disk guard admits it, the lane decides by
 * it whether the batch is written inline).
 *
 * The three lists are left out of the cyclic GC: they hold bytes and ints only, and are the producer's
 * own until the batch is written (never handed to a caller), so they can never be part of a reference
 * cycle; tracked, every collection a batch's allocations start walks their thousands of items. */
PyObject *adq_py_encode_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs < 3 || nargs > 5) {
        PyErr_SetString(PyExc_TypeError, "encode_records takes 3 to 5 arguments");
        return NULL;
    }
    PyObject *prepared = nargs >= 4 && args[3] != Py_None ? args[3] : NULL;
    int keyless = adq_keyless_bits(nargs == 5 ? args[4] : NULL);
    if (keyless < 0) return NULL;
    if (prepared != NULL && !adq_zstd_is_prepared(prepared)) {
        PyErr_SetString(PyExc_TypeError, "encode_records: prepared is a prepared zstd dictionary or None");
        return NULL;
    }
    PyObject *items = args[0], *now = args[1];
    long partition_count = PyLong_AsLong(args[2]);
    if (partition_count <= 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "partition_count must be positive");
        return NULL;
    }
    if (!PyList_CheckExact(items) || !PyLong_CheckExact(now) || adq_record_type == NULL) return not_implemented();
    Py_ssize_t count = PyList_GET_SIZE(items);
    PyObject *result = NULL, *zero = NULL;
    PyObject *records = PyList_New(count), *stamps = PyList_New(count);
    PyObject *partitions = PyList_New(count);
    PyObject *hashes = count > PY_SSIZE_T_MAX / 4 ? PyErr_NoMemory() : PyBytes_FromStringAndSize(NULL, count * 4);
    Py_ssize_t largest = 0, total = 0;
    if (records == NULL || stamps == NULL || partitions == NULL || hashes == NULL) goto done;
    if (!still_of_length(&items, 1, count)) goto reference;
    /* `now` converted once: most records take it (an int out of range leaves them to the reference). */
    long long now_ns = 0;
    int now_fits = timestamp_of(now, &now_ns);
    zero = PyLong_FromLong(0); /* CPython's cached small int */
    if (zero == NULL) goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = PyList_GET_ITEM(items, i);
        PyObject *value, *key = Py_None, *headers = Py_None, *stamp = Py_None, *tag = Py_None;
        if (PyBytes_CheckExact(item)) {
            value = item;
        } else if (Py_TYPE(item) == adq_record_type && PyTuple_GET_SIZE(item) == 5) {
            value = PyTuple_GET_ITEM(item, 0);
            key = PyTuple_GET_ITEM(item, 1);
            headers = PyTuple_GET_ITEM(item, 2);
            stamp = PyTuple_GET_ITEM(item, 3);
            tag = PyTuple_GET_ITEM(item, 4);
        } else {
            goto reference;
        }
        long long timestamp_ns = now_ns;
        if (stamp == Py_None) {
            stamp = now;
            if (!now_fits) goto reference;
        } else if (!timestamp_of(stamp, &timestamp_ns)) {
            goto reference;
        }
        const uint8_t *raw;
        size_t key_len;
        uint8_t random_key[8];
        int attributes = prepared ? ADQ_COMPRESSED : 0;
        if (key == Py_None) {
            adq_store_u64(random_key, next_random());
            raw = random_key;
            key_len = 8;
            attributes |= keyless;
        } else if (!key_bytes(key, &raw, &key_len)) {
            goto reference;
        }
        PyObject *stored = value;
        if (prepared != NULL) {
            if (!PyBytes_CheckExact(value)) goto reference;
            stored = adq_zstd_compress(prepared, value);
            if (stored == NULL) goto done;
        }
        PyObject *record = encode_at(stored, raw, key_len, timestamp_ns, headers, attributes, tag);
        Py_ssize_t uncompressed = 0; /* what the value adds to the record when stored as it is */
        if (stored != value) {
            uncompressed = PyBytes_GET_SIZE(value) - PyBytes_GET_SIZE(stored);
            Py_DECREF(stored);
        }
        if (record == NULL) {
            if (PyErr_Occurred()) goto done;
            goto reference;
        }
        PyList_SET_ITEM(records, i, record);
        total += PyBytes_GET_SIZE(record);
        if (PyBytes_GET_SIZE(record) + uncompressed > largest) largest = PyBytes_GET_SIZE(record) + uncompressed;
        PyList_SET_ITEM(stamps, i, Py_NewRef(stamp));
        /* One partition: every record's is the same 0 (one lookup of the cached int for the batch). */
        PyObject *partition = partition_count == 1 ? Py_NewRef(zero)
                                                   : PyLong_FromUnsignedLong(partition_of(raw, key_len, partition_count));
        if (partition == NULL) goto done;
        PyList_SET_ITEM(partitions, i, partition);
        uint32_t hash = adq_crc32(0, raw, key_len);
        memcpy(PyBytes_AS_STRING(hashes) + 4 * i, &hash, 4); /* the host's order, as array("I") */
    }
    PyObject_GC_UnTrack(records);
    PyObject_GC_UnTrack(stamps);
    PyObject_GC_UnTrack(partitions);
    result = Py_BuildValue("(OOOOnn)", records, stamps, partitions, hashes, largest, total);
    goto done;
reference:
    result = not_implemented();
done:
    Py_XDECREF(records);
    Py_XDECREF(stamps);
    Py_XDECREF(partitions);
    Py_XDECREF(hashes);
    Py_XDECREF(zero);
    return result;
}

/* first + i as a Python int. */
static PyObject *wide_offset(PyObject *first, Py_ssize_t i) {
    PyObject *step = PyLong_FromSsize_t(i);
    if (step == NULL) return NULL;
    PyObject *sum = PyNumber_Add(first, step);
    Py_DECREF(step);
    return sum;
}

/* receipts(partition, first_offset, count) -> [Receipt(partition, first_offset + i) ...]: untracked
 * tuples of two ints, which can never be part of a reference cycle. */
PyObject *adq_py_receipts(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "receipts takes 3 arguments");
        return NULL;
    }
    long long first = PyLong_AsLongLong(args[1]);
    Py_ssize_t count = PyLong_AsSsize_t(args[2]);
    if (PyErr_Occurred()) return NULL;
    if (adq_receipt_type == NULL || count < 0) {
        PyErr_SetString(PyExc_ValueError, "receipts: configure() first, and a count of 0 or more");
        return NULL;
    }
    /* Offsets past 2**63 - 1 (never a stream's, but an argument's) are summed as Python ints. */
    int wide = count > 0 && first > LLONG_MAX - (count - 1);
    PyObject *list = PyList_New(count);
    if (list == NULL) return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *offset = wide ? wide_offset(args[1], i) : PyLong_FromLongLong(first + i);
        PyObject *receipt = offset == NULL ? NULL : adq_receipt_new(); /* untracked, filled here */
        if (receipt == NULL) {
            Py_XDECREF(offset);
            Py_DECREF(list);
            return NULL;
        }
        PyTuple_SET_ITEM(receipt, 0, Py_NewRef(args[0]));
        PyTuple_SET_ITEM(receipt, 1, offset);
        PyList_SET_ITEM(list, i, receipt);
    }
    return list;
}

/* What log/pack.c shares of this file's per-record work (see core.h). Wrappers, so that the calls within
 * this file stay calls of static functions the compiler inlines, as they were before log/pack.c: an
 * exported function of a shared library is called through its symbol, which a push felt. */
uint64_t adq_record_size(PyObject *value, size_t key_len, PyObject *headers, PyObject *tag, const char **raw_tag,
                         Py_ssize_t *tag_len) {
    return record_size(value, key_len, headers, tag, raw_tag, tag_len);
}

void adq_write_record(uint8_t *out, uint64_t size, PyObject *value, const uint8_t *key, size_t key_len,
                      long long timestamp_ns, PyObject *headers, int attributes, const char *raw_tag,
                      Py_ssize_t tag_len) {
    write_record(out, size, value, key, key_len, timestamp_ns, headers, attributes, raw_tag, tag_len);
}

int adq_timestamp_of(PyObject *timestamp, long long *timestamp_ns) { return timestamp_of(timestamp, timestamp_ns); }

int adq_key_bytes(PyObject *key, const uint8_t **raw, size_t *length) { return key_bytes(key, raw, length); }

uint64_t adq_next_random(void) { return next_random(); }
