/* A record batch from KafkaRecords or from stored Messages: the reference's encode_batch,
 * encode_records and encode_messages (adiskq/kafka/wire/codec.py, which has the format).
 *
 * kafka_encode_records(records, base_timestamp_ms) -> (section, last_offset_delta, max_timestamp_ms)
 *     the records section of a batch, uncompressed (a compressed batch's, before its codec runs).
 * kafka_encode_batch(base_offset, records, base_timestamp_ms, producer_id, producer_epoch,
 *                    base_sequence, partition_leader_epoch) -> bytes
 *     a whole uncompressed batch, CRC-32C included, in one allocation.
 * kafka_encode_messages(messages, nulls_header, partition_leader_epoch) -> bytes
 *     the same from adiskq Messages (what a Fetch reads), without a KafkaRecord in between: offsets
 *     from the first message's, milliseconds floored from nanoseconds, a null key or value where the
 *     `nulls_header` header (a str, or None for no such header) names it, that header left out.
 * All three answer NotImplemented for anything but plain arguments in range (a record that is not a
 * 5-tuple, a key that is a bytearray, offset deltas that do not increase, a header key with a lone
 * surrogate, headers that are not a dict, ...): the reference then raises its own error, or encodes
 * the unusual input.
 *
 * Two passes over the records: the first checks every field and adds up the sizes, the second
 * writes into a bytes object of exactly that size. */
#include "codec.h"

#define NOT_PLAIN 1
#define MESSAGE_OFFSET 1 /* adiskq.Message's fields (core.h's ADQ_MESSAGE_FIELDS of them) */
#define MESSAGE_TIMESTAMP_NS 2
#define MESSAGE_KEY 3
#define MESSAGE_VALUE 4
#define MESSAGE_HEADERS 5

/* A key, value or header value: bytes (exact type) or None; its size with the length varint. */
static int field_size(PyObject *field, size_t *size) {
    if (field == Py_None) {
        *size += 1;
        return 0;
    }
    if (!PyBytes_CheckExact(field) || PyBytes_GET_SIZE(field) > INT32_MAX) return NOT_PLAIN;
    *size += kq_varint_size(PyBytes_GET_SIZE(field)) + (size_t)PyBytes_GET_SIZE(field);
    return 0;
}

static uint8_t *write_field(uint8_t *out, PyObject *field) {
    if (field == Py_None) return kq_write_varint(out, -1);
    Py_ssize_t length = PyBytes_GET_SIZE(field);
    out = kq_write_varint(out, length);
    memcpy(out, PyBytes_AS_STRING(field), (size_t)length);
    return out + length;
}

static int exact_int64(PyObject *object, int64_t low, int64_t high, int64_t *value) {
    if (!PyLong_CheckExact(object)) return NOT_PLAIN;
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(object, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (overflow || v < low || v > high) return NOT_PLAIN;
    *value = v;
    return 0;
}

/* One record, checked: what the second pass writes. The objects are borrowed from the caller's. */
typedef struct {
    int64_t offset_delta;
    int64_t timestamp_ms;
    PyObject *key;     /* bytes, or Py_None for null */
    PyObject *value;   /* bytes, or Py_None for null */
    PyObject *headers; /* a list or tuple of (str, bytes | None) pairs, a dict of str to bytes, or NULL */
    PyObject *skip;    /* the dict's key to leave out (the nulls header, a str), or NULL */
    /* The nulls header's UTF-8, whose escaped names (it and '~' marks) lose one mark; NULL for none */
    const char *escape_prefix;
    Py_ssize_t escape_prefix_length;
    Py_ssize_t header_count;
    size_t body_size; /* bytes after the record's length varint */
} record_plan;

/* The next header of a plan's headers: 1 and the pair, or 0 at the end. */
typedef struct {
    Py_ssize_t index;
} header_cursor;

static int next_header(const record_plan *plan, header_cursor *cursor, PyObject **name, PyObject **value) {
    if (plan->headers == NULL) return 0;
    if (PyDict_Check(plan->headers)) {
        while (PyDict_Next(plan->headers, &cursor->index, name, value))
            /* both str: the comparison cannot fail */
            if (plan->skip == NULL || !PyUnicode_Check(*name) || PyUnicode_Compare(*name, plan->skip) != 0) return 1;
        return 0;
    }
    if (cursor->index >= PySequence_Fast_GET_SIZE(plan->headers)) return 0;
    PyObject *pair = PySequence_Fast_ITEMS(plan->headers)[cursor->index++];
    *name = PyTuple_GET_ITEM(pair, 0);
    *value = PyTuple_GET_ITEM(pair, 1);
    return 1;
}

/* A header name's length as served: an escaped name (the nulls header and '~' marks, as
 * wire.mapping.stored_header_name stores a Kafka header named like it) loses its last mark. */
static Py_ssize_t served_length(const record_plan *plan, const char *text, Py_ssize_t length) {
    Py_ssize_t prefix = plan->escape_prefix_length;
    if (plan->escape_prefix == NULL || length <= prefix || memcmp(text, plan->escape_prefix, (size_t)prefix) != 0)
        return length;
    for (Py_ssize_t i = prefix; i < length; i++)
        if (text[i] != '~') return length;
    return length - 1;
}

/* Check a plan's fields against the rules (deltas increasing, timestamps in range, types) and size
 * its body: 0, NOT_PLAIN, or -1 for a Python error. */
static int size_record(record_plan *plan, int64_t base_timestamp_ms, int64_t *previous_delta, int64_t *max_timestamp_ms) {
    int64_t timestamp_delta;
    if (plan->offset_delta < 0 || plan->offset_delta > INT32_MAX || plan->offset_delta <= *previous_delta)
        return NOT_PLAIN;
    *previous_delta = plan->offset_delta;
    if (__builtin_sub_overflow(plan->timestamp_ms, base_timestamp_ms, &timestamp_delta)) return NOT_PLAIN;
    if (plan->timestamp_ms > *max_timestamp_ms) *max_timestamp_ms = plan->timestamp_ms;
    size_t size = 1 + kq_varint_size(timestamp_delta) + kq_varint_size(plan->offset_delta) +
                  kq_varint_size(plan->header_count);
    if (field_size(plan->key, &size) || field_size(plan->value, &size)) return NOT_PLAIN;
    header_cursor cursor = {0};
    PyObject *name, *value;
    while (next_header(plan, &cursor, &name, &value)) {
        if (!PyUnicode_CheckExact(name)) return NOT_PLAIN;
        Py_ssize_t name_len;
        const char *text = PyUnicode_AsUTF8AndSize(name, &name_len);
        if (text == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return -1;
            PyErr_Clear(); /* a lone surrogate: the reference says so */
            return NOT_PLAIN;
        }
        name_len = served_length(plan, text, name_len);
        size += kq_varint_size(name_len) + (size_t)name_len;
        if (field_size(value, &size)) return NOT_PLAIN;
    }
    if (size > INT32_MAX) return NOT_PLAIN;
    plan->body_size = size;
    return 0;
}

static uint8_t *write_record(uint8_t *out, const record_plan *plan, int64_t base_timestamp_ms) {
    out = kq_write_varint(out, (int64_t)plan->body_size);
    *out++ = 0; /* attributes */
    out = kq_write_varint(out, plan->timestamp_ms - base_timestamp_ms); /* checked by size_record */
    out = kq_write_varint(out, plan->offset_delta);
    out = write_field(out, plan->key);
    out = write_field(out, plan->value);
    out = kq_write_varint(out, plan->header_count);
    header_cursor cursor = {0};
    PyObject *name, *value;
    while (next_header(plan, &cursor, &name, &value)) {
        Py_ssize_t name_len;
        const char *text = PyUnicode_AsUTF8AndSize(name, &name_len); /* cached by size_record */
        name_len = served_length(plan, text, name_len);
        out = kq_write_varint(out, name_len);
        memcpy(out, text, (size_t)name_len);
        out += name_len;
        out = write_field(out, value);
    }
    return out;
}

/* A KafkaRecord (any 5-tuple) as a plan: 0 or NOT_PLAIN (-1 for a Python error). */
static int plan_kafka_record(PyObject *item, record_plan *plan) {
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != KQ_RECORD_FIELDS) return NOT_PLAIN;
    int status;
    if ((status = exact_int64(PyTuple_GET_ITEM(item, 0), INT64_MIN, INT64_MAX, &plan->offset_delta)) != 0 ||
        (status = exact_int64(PyTuple_GET_ITEM(item, 1), INT64_MIN, INT64_MAX, &plan->timestamp_ms)) != 0)
        return status;
    plan->key = PyTuple_GET_ITEM(item, 2);
    plan->value = PyTuple_GET_ITEM(item, 3);
    plan->headers = PyTuple_GET_ITEM(item, 4);
    plan->skip = NULL;
    plan->escape_prefix = NULL;
    plan->escape_prefix_length = 0;
    if (!PyList_Check(plan->headers) && !PyTuple_Check(plan->headers)) return NOT_PLAIN;
    plan->header_count = PySequence_Fast_GET_SIZE(plan->headers);
    PyObject **pairs = PySequence_Fast_ITEMS(plan->headers);
    for (Py_ssize_t h = 0; h < plan->header_count; h++)
        if (!PyTuple_Check(pairs[h]) || PyTuple_GET_SIZE(pairs[h]) != 2) return NOT_PLAIN;
    return 0;
}

/* Whether the comma-separated `names` (the nulls header's value) holds `word` as one of its items. */
static int names_hold(PyObject *names, const char *word) {
    const char *text = PyBytes_AS_STRING(names);
    Py_ssize_t length = PyBytes_GET_SIZE(names), word_len = (Py_ssize_t)strlen(word), start = 0;
    for (Py_ssize_t i = 0; i <= length; i++) {
        if (i == length || text[i] == ',') {
            if (i - start == word_len && memcmp(text + start, word, (size_t)word_len) == 0) return 1;
            start = i + 1;
        }
    }
    return 0;
}

/* An adiskq Message as a plan, its offset delta from first_offset: 0 or NOT_PLAIN (-1: error). */
static int plan_message(PyObject *item, int64_t first_offset, PyObject *nulls_header, record_plan *plan) {
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != ADQ_MESSAGE_FIELDS) return NOT_PLAIN;
    int64_t offset, timestamp_ns;
    int status;
    if ((status = exact_int64(PyTuple_GET_ITEM(item, MESSAGE_OFFSET), INT64_MIN, INT64_MAX, &offset)) != 0 ||
        (status = exact_int64(PyTuple_GET_ITEM(item, MESSAGE_TIMESTAMP_NS), INT64_MIN, INT64_MAX, &timestamp_ns)) != 0)
        return status;
    if (__builtin_sub_overflow(offset, first_offset, &plan->offset_delta)) return NOT_PLAIN;
    plan->timestamp_ms = timestamp_ns / 1000000 - (timestamp_ns % 1000000 < 0); /* floored, as // is */
    plan->key = PyTuple_GET_ITEM(item, MESSAGE_KEY);
    plan->value = PyTuple_GET_ITEM(item, MESSAGE_VALUE);
    plan->headers = PyTuple_GET_ITEM(item, MESSAGE_HEADERS);
    plan->skip = NULL;
    plan->escape_prefix = NULL;
    plan->escape_prefix_length = 0;
    if (!PyBytes_CheckExact(plan->key) || !PyBytes_CheckExact(plan->value)) return NOT_PLAIN;
    if (plan->headers == adq_empty_headers) {
        plan->headers = NULL;
        plan->header_count = 0;
        return 0;
    }
    if (!PyDict_CheckExact(plan->headers)) return NOT_PLAIN;
    plan->header_count = PyDict_GET_SIZE(plan->headers);
    if (nulls_header != Py_None && plan->header_count) {
        /* its escaped names are served with one '~' fewer (wire.codec.served_header_name) */
        plan->escape_prefix = PyUnicode_AsUTF8AndSize(nulls_header, &plan->escape_prefix_length);
        if (plan->escape_prefix == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return -1;
            PyErr_Clear(); /* a lone surrogate: the reference says so */
            return NOT_PLAIN;
        }
        PyObject *nulls = PyDict_GetItemWithError(plan->headers, nulls_header);
        if (nulls == NULL && PyErr_Occurred()) return -1;
        if (nulls != NULL) {
            if (!PyBytes_CheckExact(nulls)) return NOT_PLAIN;
            if (names_hold(nulls, "key")) plan->key = Py_None;
            if (names_hold(nulls, "value")) plan->value = Py_None;
            plan->skip = nulls_header;
            plan->header_count--;
        }
    }
    return 0;
}

typedef struct {
    record_plan *plans;
    Py_ssize_t count;
    int64_t first_offset; /* of the first Message */
    size_t section_size;
    int64_t base_timestamp_ms;
    int64_t last_offset_delta;
    int64_t max_timestamp_ms;
} section_plan;

/* Plan every record of `items` (a list or tuple of KafkaRecords, or of Messages when `messages`):
 * 0, NOT_PLAIN or -1; plans freed unless 0. */
static int plan_section(PyObject *items_object, int messages, PyObject *nulls_header, section_plan *section) {
    if (!PyList_Check(items_object) && !PyTuple_Check(items_object)) return NOT_PLAIN;
    section->count = PySequence_Fast_GET_SIZE(items_object);
    section->plans = PyMem_Malloc((size_t)(section->count ? section->count : 1) * sizeof(record_plan));
    if (section->plans == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    section->section_size = 0;
    section->last_offset_delta = -1;
    section->max_timestamp_ms = INT64_MIN;
    PyObject **items = PySequence_Fast_ITEMS(items_object);
    section->first_offset = 0;
    int status = 0;
    for (Py_ssize_t i = 0; i < section->count && status == 0; i++) {
        record_plan *plan = &section->plans[i];
        if (messages) {
            if (i == 0 && PyTuple_Check(items[0]) && PyTuple_GET_SIZE(items[0]) == ADQ_MESSAGE_FIELDS)
                status = exact_int64(PyTuple_GET_ITEM(items[0], MESSAGE_OFFSET), INT64_MIN, INT64_MAX,
                                     &section->first_offset);
            if (status == 0) status = plan_message(items[i], section->first_offset, nulls_header, plan);
            if (status == 0 && i == 0) section->base_timestamp_ms = plan->timestamp_ms;
        } else {
            status = plan_kafka_record(items[i], plan);
        }
        if (status == 0)
            status = size_record(plan, section->base_timestamp_ms, &section->last_offset_delta,
                                 &section->max_timestamp_ms);
        if (status == 0) {
            section->section_size += kq_varint_size((int64_t)plan->body_size) + plan->body_size;
            if (section->section_size > INT32_MAX) status = NOT_PLAIN;
        }
    }
    if (status != 0) PyMem_Free(section->plans);
    return status;
}

static void write_section(uint8_t *out, const section_plan *section) {
    for (Py_ssize_t i = 0; i < section->count; i++) out = write_record(out, &section->plans[i], section->base_timestamp_ms);
}

/* The whole batch of a planned section (plans freed), or NULL. */
static PyObject *batch_bytes(section_plan *section, int64_t base_offset, int64_t producer_id, int64_t producer_epoch,
                             int64_t base_sequence, int64_t leader_epoch) {
    size_t total = KQ_HEADER_BYTES + section->section_size;
    PyObject *bytes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (bytes == NULL) {
        PyMem_Free(section->plans);
        return NULL;
    }
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(bytes);
    kq_store_be64(out, (uint64_t)base_offset);
    kq_store_be32(out + 8, (uint32_t)(total - KQ_LENGTH_PREFIX_BYTES));
    kq_store_be32(out + 12, (uint32_t)leader_epoch);
    out[KQ_MAGIC_AT] = KQ_MAGIC;
    uint8_t *after_crc = out + KQ_ATTRIBUTES_AT;
    kq_store_be16(after_crc, 0); /* attributes: no compression, CreateTime */
    kq_store_be32(after_crc + 2, (uint32_t)section->last_offset_delta);
    kq_store_be64(after_crc + 6, (uint64_t)section->base_timestamp_ms);
    kq_store_be64(after_crc + 14, (uint64_t)section->max_timestamp_ms);
    kq_store_be64(after_crc + 22, (uint64_t)producer_id);
    kq_store_be16(after_crc + 30, (uint16_t)producer_epoch);
    kq_store_be32(after_crc + 32, (uint32_t)base_sequence);
    kq_store_be32(after_crc + 36, (uint32_t)section->count);
    write_section(out + KQ_HEADER_BYTES, section);
    PyMem_Free(section->plans);
    kq_store_be32(out + KQ_CRC_AT, adq_crc32c(0, after_crc, total - KQ_ATTRIBUTES_AT));
    return bytes;
}

static int has_records(PyObject *items) {
    return (PyList_Check(items) && PyList_GET_SIZE(items) > 0) || (PyTuple_Check(items) && PyTuple_GET_SIZE(items) > 0);
}

/* kafka_encode_records(records, base_timestamp_ms) */
PyObject *adq_py_kafka_encode_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "kafka_encode_records(records, base_timestamp_ms) takes 2 arguments");
        return NULL;
    }
    section_plan section;
    int status = exact_int64(args[1], INT64_MIN, INT64_MAX, &section.base_timestamp_ms);
    if (status == 0) status = plan_section(args[0], 0, Py_None, &section);
    if (status < 0) return NULL;
    if (status == NOT_PLAIN) Py_RETURN_NOTIMPLEMENTED;
    PyObject *bytes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)section.section_size);
    if (bytes != NULL) write_section((uint8_t *)PyBytes_AS_STRING(bytes), &section);
    PyMem_Free(section.plans);
    if (bytes == NULL) return NULL;
    return Py_BuildValue("(NLL)", bytes, (long long)section.last_offset_delta, (long long)section.max_timestamp_ms);
}

/* kafka_encode_batch(base_offset, records, base_timestamp_ms, producer_id, producer_epoch, base_sequence,
 *                    partition_leader_epoch) */
PyObject *adq_py_kafka_encode_batch(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "kafka_encode_batch(base_offset, records, base_timestamp_ms, producer_id, producer_epoch, "
                        "base_sequence, partition_leader_epoch) takes 7 arguments");
        return NULL;
    }
    int64_t base_offset, producer_id, producer_epoch, base_sequence, leader_epoch;
    section_plan section;
    int status = exact_int64(args[0], INT64_MIN, INT64_MAX, &base_offset);
    if (status == 0) status = exact_int64(args[2], INT64_MIN, INT64_MAX, &section.base_timestamp_ms);
    if (status == 0) status = exact_int64(args[3], INT64_MIN, INT64_MAX, &producer_id);
    if (status == 0) status = exact_int64(args[4], INT16_MIN, INT16_MAX, &producer_epoch);
    if (status == 0) status = exact_int64(args[5], INT32_MIN, INT32_MAX, &base_sequence);
    if (status == 0) status = exact_int64(args[6], INT32_MIN, INT32_MAX, &leader_epoch);
    if (status == 0 && !has_records(args[1])) status = NOT_PLAIN; /* a batch holds at least one record */
    if (status == 0) status = plan_section(args[1], 0, Py_None, &section);
    if (status < 0) return NULL;
    if (status == NOT_PLAIN) Py_RETURN_NOTIMPLEMENTED;
    return batch_bytes(&section, base_offset, producer_id, producer_epoch, base_sequence, leader_epoch);
}

/* kafka_encode_messages(messages, nulls_header, partition_leader_epoch) */
PyObject *adq_py_kafka_encode_messages(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError,
                        "kafka_encode_messages(messages, nulls_header, partition_leader_epoch) takes 3 arguments");
        return NULL;
    }
    if (args[1] != Py_None && !PyUnicode_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "kafka_encode_messages: nulls_header is a str or None");
        return NULL;
    }
    if (adq_empty_headers == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "kafka_encode_messages: the core is not configured");
        return NULL;
    }
    int64_t leader_epoch;
    section_plan section;
    int status = exact_int64(args[2], INT32_MIN, INT32_MAX, &leader_epoch);
    if (status == 0 && !has_records(args[0])) status = NOT_PLAIN;
    if (status == 0) status = plan_section(args[0], 1, args[1], &section);
    if (status < 0) return NULL;
    if (status == NOT_PLAIN) Py_RETURN_NOTIMPLEMENTED;
    return batch_bytes(&section, section.first_offset, -1, -1, -1, leader_epoch);
}
