/* adiskq's compiled core: the codec's per-record work, sans I/O but for log/append.c (see adiskq/_sansio/codec.py, the
 * pure-Python reference every function here must match byte for byte, error for error).
 *
 * One job per source file: adiskq/_csrc/README.md lists them, each with its pure-Python reference.
 *
 * The record layout (all integers little-endian; the reference's docstring is the full text):
 *   u32 size | u32 crc | u8 magic 0xAD | u8 attributes | i64 timestamp_ns | u32 key_len | key |
 *   [u16 tag_len | UTF-8 tag: only when attributes bit 0 is set] |
 *   [i64 producer_id | i16 epoch: only when bit 2 is set]
 *   [u8 commit | i32 coordinator_epoch | i64 first_offset: only with bit 3] |
 *   u16 header_count | per header: u16 name_len, UTF-8 name, u32 value_len, value | value
 * The CRC-32C covers every byte from the magic byte on.
 */
#ifndef ADISKQ_CORE_H
#define ADISKQ_CORE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define ADQ_MAGIC_V1 0xADu
#define ADQ_SIZE_AT 0
#define ADQ_CRC_AT 4
#define ADQ_MAGIC_AT 8
#define ADQ_ATTRIBUTES_AT 9
#define ADQ_TIMESTAMP_AT 10
#define ADQ_KEY_LENGTH_AT 18
#define ADQ_KEY_AT 22
#define ADQ_MIN_RECORD_BYTES 24 /* the fixed fields plus header_count */
#define ADQ_TAGGED 0x01u        /* attributes bit 0: u16 tag_len and the UTF-8 tag follow the key */
#define ADQ_COMPRESSED 0x02u    /* attributes bit 1: the value is a zstd frame (adiskq/_sansio/compression.py) */
#define ADQ_TRANSACTIONAL 0x04u /* attributes bit 2: i64 producer_id | i16 epoch follow the tag field (or the key) */
#define ADQ_CONTROL 0x08u       /* attributes bit 3, only with bit 2: a marker, u8 commit | i32 coordinator_epoch next */
#define ADQ_KEYLESS 0x10u       /* attributes bit 4: the key was generated for a push given none */
#define ADQ_RESERVED 0xE0u      /* attributes bits 5 to 7: a record with one set is damaged */
#define ADQ_PRODUCER_BYTES 10   /* producer_id, epoch */
#define ADQ_MARKER_BYTES 13     /* commit, coordinator_epoch, first_offset */
#define ADQ_MAX_TAG_BYTES 255
/* A segment's entry files, one entry a record: their widths, defined here alone (the Python side's
 * are its reference's; tests/sansio/test_entry_widths.py holds the two together). */
#define ADQ_INDEX_ENTRY_BYTES 24     /* .index: offset | position in .data | size, u64 LE each */
#define ADQ_TIMEINDEX_ENTRY_BYTES 16 /* .timeindex: offset u64 | timestamp_ns i64, LE */
#define ADQ_TAG_ENTRY_BYTES 4        /* .tagindex: the tag's hash, u32 LE */
#define ADQ_KEY_ENTRY_BYTES 4        /* .keyindex: the key's hash, u32 LE */
/* A header's value_len that says its value is null (Kafka's null), no value bytes after it
 * (codec.py): a reader's Message then holds a Headers, which only the reference builds. */
#define ADQ_NULL_HEADER_LENGTH 0xFFFFFFFFu

static inline uint16_t adq_load_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static inline uint32_t adq_load_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    return v;
}

static inline uint64_t adq_load_u64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline void adq_store_u16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void adq_store_u32(uint8_t *p, uint32_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    memcpy(p, &v, 4);
}

static inline void adq_store_u64(uint8_t *p, uint64_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    memcpy(p, &v, 8);
}

/* log/codec_encode.c: one record's size and its writing into a buffer (what encode_records and log/pack.c share),
 * and the plain fields they take: a timestamp as an i64, a key's bytes, a random key's 8 bytes. */
uint64_t adq_record_size(PyObject *value, size_t key_len, PyObject *headers, PyObject *tag, const char **raw_tag,
                         Py_ssize_t *tag_len);
void adq_write_record(uint8_t *out, uint64_t size, PyObject *value, const uint8_t *key, size_t key_len,
                      long long timestamp_ns, PyObject *headers, int attributes, const char *raw_tag,
                      Py_ssize_t tag_len);
int adq_timestamp_of(PyObject *timestamp, long long *timestamp_ns);
int adq_key_bytes(PyObject *key, const uint8_t **raw, size_t *length);
uint64_t adq_next_random(void);
/* The attribute bits of a record pushed without a key, from an encoder's optional `keyless` argument
 * (NULL: a new stream's, ADQ_KEYLESS): 0 (a stream before format 5) or ADQ_KEYLESS; -1 with an error
 * set for anything else. */
int adq_keyless_bits(PyObject *keyless);
/* Holds the ints adq_keyless_bits compares with first (the module's start; -1 if out of memory). */
int adq_keyless_init(void);

/* log/crc32c.c */
void adq_crc32c_init(void);
uint32_t adq_crc32c(uint32_t crc, const uint8_t *data, size_t length);
uint32_t adq_crc32c_table(uint32_t crc, const uint8_t *data, size_t length); /* always the table */
const char *adq_crc32c_implementation(void);

/* log/crc32.c */
void adq_crc32_init(void);
uint32_t adq_crc32(uint32_t crc, const uint8_t *data, size_t length);

/* log/fnv.c */
uint32_t adq_fnv1_32(const uint8_t *data, size_t length);

/* log/codec_record.c: what the bytes at a position hold */
typedef enum {
    ADQ_RECORD_OK = 0,   /* a whole, valid record */
    ADQ_RECORD_TORN = 1, /* the buffer ends before the record does (nothing present proves it bad) */
    ADQ_RECORD_BAD = 2,  /* the bytes present prove the record bad */
} adq_record_status;

typedef struct {
    size_t size;          /* bytes of the whole record */
    int64_t timestamp_ns;
    size_t key_at;        /* absolute positions in the buffer */
    size_t key_len;
    size_t tag_at;        /* the tag's first byte; tag_len 0 and tag_at 0 when it has none */
    size_t tag_len;
    int has_tag;
    size_t headers_at;    /* the first header's name_len field */
    uint16_t header_count;
    size_t value_at;
    uint8_t attributes;
    size_t transaction_at; /* the producer_id field of a transactional record (bit 2); 0 when it has none */
} adq_record;

/* Check the record at buf[pos:limit] as the reference's decode_record does, filling *record when it
 * is OK. Header names are checked to be UTF-8 as Python's strict decoder would. */
adq_record_status adq_check_record(const uint8_t *buf, size_t limit, size_t pos, uint64_t max_record_bytes,
                                   adq_record *record);
int adq_is_utf8(const uint8_t *text, size_t length);

/* The bytes of a checked record's value (stored: a zstd frame when it is compressed). */
static inline size_t adq_value_length(const adq_record *record) {
    return record->size - (record->value_at - (record->key_at - ADQ_KEY_AT));
}

/* module.c: the types and objects configure() hands over: what log/codec_decode.c builds Messages with, what
 * log/codec_encode.c takes Records as and builds Receipts with, and the seed of push_many's random keys. */
extern PyTypeObject *adq_message_type;
extern PyObject *adq_empty_headers;
extern PyTypeObject *adq_record_type;
extern PyTypeObject *adq_receipt_type;
extern uint64_t adq_random_state;

/* log/values_message.c: a Message of seven slots, left for the caller to fill (untracked, reference count 1),
 * and configure()'s installation of the Message type, which gives it the dealloc that keeps a free
 * list of them. */
#define ADQ_MESSAGE_FIELDS 7
PyObject *adq_message_new(void);
void adq_message_install(PyTypeObject *type);

/* log/values_receipt.c: a Receipt of two slots, left for the caller to fill (untracked, reference count 1), and
 * configure()'s installation of the Receipt type, which gives it the dealloc that keeps a free list
 * of them. */
PyObject *adq_receipt_new(void);
void adq_receipt_install(PyTypeObject *type);
PyObject *adq_py_receipt(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* log/values_named_tuple.c: what log/values_message.c's and log/values_receipt.c's free lists share. */
int adq_plain_named_tuple(PyTypeObject *type);
void adq_named_tuple_free(PyObject *self, destructor dealloc);

/* log/buffered.c: the Buffer type (and the Ready awaitable it hands out), added to the module */
int adq_add_iteration_types(PyObject *module);

/* log/compression.c: the value a compressed record's frame holds (NULL, no exception set, when it is not a
 * valid frame of one of `dictionaries`, a dict of prepared dictionaries by id; see log/compression.c). `last`
 * starts zeroed for each decoding call and keeps the dictionary found last. */
typedef struct {
    unsigned id;
    void *prepared;
} adq_zstd_last;
PyObject *adq_zstd_decompress(const uint8_t *frame, size_t length, PyObject *dictionaries, size_t limit,
                              adq_zstd_last *last);
/* ...and a value (bytes) compressed with a prepared dictionary (a capsule adq_zstd_is_prepared accepts) */
PyObject *adq_zstd_compress(PyObject *prepared, PyObject *value);
int adq_zstd_is_prepared(PyObject *candidate);

/* The Python-facing functions, one file each (module.c lists them). */
PyObject *adq_py_encode_record(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *adq_py_encode_batch(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *adq_py_encode_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *adq_py_receipts(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *adq_py_record_new(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *adq_py_sorted_key_values(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *adq_py_install_record_call(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *adq_py_place(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *adq_py_encode_push(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *adq_py_decode_messages(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *adq_py_decode_at(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *adq_py_scan_columns(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *adq_py_next_valid_record(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *adq_py_tag_column(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *adq_py_matching_entries(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *adq_py_matching_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *adq_py_index_entries(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *adq_py_zstd_prepare(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *adq_py_zstd_compress(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *adq_py_append_record(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *adq_py_append_one(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *adq_py_place_entries(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *adq_py_pack_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
