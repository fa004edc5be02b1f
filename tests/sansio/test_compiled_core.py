"""The compiled core against the pure-Python reference: same bytes, messages, errors and positions.

Every function of ``adiskq._sansio.core`` is fed the same records, the same random bytes and the same
damaged buffers as ``adiskq._sansio.codec`` (the reference), and must answer exactly as it does. The
suite's first run uses the compiled core; this file is the proof that it may.
"""

from __future__ import annotations

import gc
import inspect
import os
import pickle
import random
import re
import struct
import sys
import zlib
from collections.abc import Callable, Mapping
from typing import NamedTuple

import crc32c as crc32c_package
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import adiskq
from adiskq import InvalidArgumentError
from adiskq._sansio import codec as reference
from adiskq._sansio import core, keyindex
from adiskq._sansio import tags as reference_tags
from adiskq._sansio.naming import fnv1_32 as reference_fnv1_32
from adiskq._sansio.values import EMPTY_HEADERS, Headers, Message, Receipt, Record

values = st.binary(max_size=300)
keys = st.binary(max_size=40)
timestamps = st.integers(min_value=-(2**63), max_value=2**63 - 1)
header_names = st.text(max_size=12)
headers = st.dictionaries(header_names, st.binary(max_size=20), max_size=4)
tags = st.one_of(st.none(), st.text(min_size=1, max_size=8))
fields = st.tuples(values, keys, timestamps, headers, tags)
Fields = tuple[bytes, bytes, int, dict[str, bytes], str | None]


def outcome(call: Callable[[], object]) -> object:
    """What a call returned, or its error as (type, message, position): what must be equal."""
    try:
        return call()
    except Exception as error:  # every error, typed and worded, is part of the contract
        return (type(error).__name__, str(error), getattr(error, "position", None))


def records_buffer(batch: list[Fields] | list[tuple[bytes, bytes, int, dict[str, bytes]]]) -> bytes:
    return b"".join(reference.encode_record(v, k, t, h, 0, *tag) for v, k, t, h, *tag in batch)


def test_a_fresh_install_runs_the_compiled_core() -> None:
    """What CI installs compiles the core; only ADISKQ_NO_EXTENSIONS=1 selects the reference."""
    wanted = os.environ.get("ADISKQ_NO_EXTENSIONS", "") in ("", "0")
    assert core.COMPILED is wanted
    assert adiskq.compiled is wanted
    if wanted:
        assert core.encode_record is not reference.encode_record
        assert core.CRC32C_IMPLEMENTATION in ("sse4.2", "armv8-crc", "table")


# -- checksums and hashes --------------------------------------------------------------------------


@given(st.binary(max_size=5000), st.integers(min_value=0, max_value=2**32 - 1))
def test_crc32c_matches_the_package_by_instruction_and_by_table(data: bytes, start: int) -> None:
    from adiskq import _compiled

    expected = crc32c_package.crc32c(data, start)
    assert _compiled.crc32c(data, start) == expected
    assert _compiled.crc32c_table(data, start) == expected
    assert core.crc32c(data) == crc32c_package.crc32c(data)


@given(st.binary(max_size=200), st.integers(min_value=0, max_value=2**32 - 1))
def test_crc32_is_zlibs(data: bytes, start: int) -> None:
    from adiskq import _compiled

    assert _compiled.crc32(data, start) == zlib.crc32(data, start)


@given(st.binary(max_size=200))
def test_fnv1_32_is_the_reference(data: bytes) -> None:
    assert core.fnv1_32(data) == reference_fnv1_32(data)


@given(st.one_of(st.text(max_size=30), st.binary(max_size=30)), st.integers(min_value=1, max_value=64))
def test_placing_a_key_is_the_reference(key: str | bytes, partition_count: int) -> None:
    assert core.place(key, partition_count) == core.reference_place(key, partition_count)


# -- encoding --------------------------------------------------------------------------------------


@given(values, keys, timestamps, headers, st.integers(min_value=0, max_value=255), tags)
def test_encode_record_gives_the_references_bytes(
    value: bytes, key: bytes, timestamp_ns: int, hdrs: dict[str, bytes], attributes: int, tag: str | None
) -> None:
    """The same bytes, or the same refusal: attributes bits 2 and 3 come only with a transaction's
    fields (``transaction=``), and bits 5 to 7 are reserved."""
    try:
        expected = reference.encode_record(value, key, timestamp_ns, hdrs, attributes, tag)
    except InvalidArgumentError as refused:
        assert attributes & (reference.TRANSACTIONAL | reference.CONTROL | 0xE0)
        with pytest.raises(InvalidArgumentError, match=re.escape(str(refused))):
            core.encode_record(value, key, timestamp_ns, hdrs, attributes, tag)
        return
    assert core.encode_record(value, key, timestamp_ns, hdrs, attributes, tag) == expected


@given(st.lists(fields, max_size=20), st.booleans(), st.booleans())
def test_encode_batch_gives_the_references_bytes(batch: list[Fields], with_headers: bool, with_tags: bool) -> None:
    vals, ks, stamps, hdrs, tgs = [list(column) for column in zip(*batch, strict=True)] or [[], [], [], [], []]
    given_headers = hdrs if with_headers else None
    given_tags = tgs if with_tags else None
    assert core.encode_batch(vals, ks, stamps, given_headers, given_tags) == reference.encode_batch(
        vals, ks, stamps, given_headers, given_tags
    )


@given(st.lists(fields, max_size=20))
def test_the_tag_column_is_the_references(batch: list[Fields]) -> None:
    """The .tagindex entries of a batch: one CRC-32 of the tag per record, 0 for none, as the reference."""
    records = [reference.encode_record(v, k, t, h, 0, tag) for v, k, t, h, tag in batch]
    assert core.tag_column(records) == reference_tags.tag_column(records)
    assert list(reference_tags.unpack_column(core.tag_column(records))) == [
        0 if tag is None else reference_tags.tag_hash(tag) for *_, tag in batch
    ]


@given(
    st.lists(st.tuples(st.sampled_from([0, 1, 5, 7, 2**32 - 1]), st.integers(min_value=0, max_value=50)), max_size=40),
    st.lists(st.sampled_from([1, 5, 7, 2**32 - 1]), max_size=3),
    st.integers(min_value=0, max_value=45),
    st.integers(min_value=1, max_value=50),
    st.integers(min_value=-1, max_value=400),
    st.integers(min_value=0, max_value=3),
    st.data(),
)
def test_matching_records_is_the_references(
    rows: list[tuple[int, int]],
    hashes: list[int],
    covered: int,
    max_count: int,
    max_bytes: int,
    gaps: int,
    data: st.DataObject,
) -> None:
    """The filtered read's selection (the candidates, their spans merged where records touch, the
    limits, the tail past the column's end, an entry for the wrong offset) answers as the reference."""
    entries = bytearray()
    position = 0
    for i, (_, size) in enumerate(rows):
        entries += struct.pack("<QQQ", 1000 + i, position, size)
        position += size + (i % 2 if gaps else 0)  # with gaps: some records do not touch
    if rows and data.draw(st.booleans()):
        bad = data.draw(st.integers(min_value=0, max_value=len(rows) - 1))
        struct.pack_into("<Q", entries, bad * 24, 5)  # an entry for another offset
    column = b"".join(struct.pack("<I", h) for h, _ in rows[:covered])
    args = (column, bytes(entries), tuple(hashes), 1000, max_count, max_bytes)
    compiled = core.matching_records(*args)
    expected = reference_tags.matching_records(*args)
    assert compiled == expected
    assert core.matching_records(column, memoryview(bytes(entries)), *args[2:]) == expected


# Damaged .index bytes: sizes and positions anywhere in u64, near its end above all (sums that
# pass 2**64), offsets that are and are not the ones expected.
u64_near_limits = st.one_of(
    st.integers(min_value=0, max_value=2**64 - 1),
    st.integers(min_value=2**64 - 200, max_value=2**64 - 1),
    st.integers(min_value=0, max_value=200),
)


@given(
    st.lists(st.tuples(st.booleans(), u64_near_limits, u64_near_limits, st.sampled_from([0, 1, 5])), max_size=12),
    st.one_of(st.integers(min_value=0, max_value=100), st.integers(min_value=2**64 - 10, max_value=2**64 - 1)),
    st.integers(min_value=0, max_value=12),
    st.integers(min_value=1, max_value=20),
    st.one_of(st.just(-1), st.integers(min_value=0, max_value=2**64 + 5)),
    st.binary(max_size=30),
)
def test_matching_records_answers_as_the_reference_on_damaged_index_bytes(
    rows: list[tuple[bool, int, int, int]],
    first_offset: int,
    covered: int,
    max_count: int,
    max_bytes: int,
    tail: bytes,
) -> None:
    """Hostile .index entries (huge sizes and positions whose sums wrap 64 bits, wrong offsets,
    a partial entry at the end) and offsets near 2**64: the compiled selection is the reference's."""
    entries = b"".join(
        struct.pack("<QQQ", (first_offset + i) % 2**64 if right else (first_offset + i + 1) % 2**64, position, size)
        for i, (right, position, size, _) in enumerate(rows)
    )
    entries += tail[: len(tail) % 24]
    column = b"".join(struct.pack("<I", h) for *_, h in rows[:covered])
    args = (column, entries, (1, 5), first_offset, max_count, max_bytes)
    expected = outcome(lambda: reference_tags.matching_records(*args))
    assert outcome(lambda: core.matching_records(*args)) == expected
    assert outcome(lambda: core.matching_records(column, memoryview(entries), *args[2:])) == expected


BAD_ENCODINGS: list[tuple[str, Callable[[Callable[..., object]], object]]] = [
    ("timestamp too large", lambda encode: encode(b"v", b"k", 2**63, None)),
    ("timestamp too small", lambda encode: encode(b"v", b"k", -(2**63) - 1, None)),
    ("header value str", lambda encode: encode(b"v", b"k", 0, {"a": "text"})),
    ("header name bytes", lambda encode: encode(b"v", b"k", 0, {b"a": b"x"})),
    ("header name surrogate", lambda encode: encode(b"v", b"k", 0, {"\udc80": b"x"})),
    ("header name too long", lambda encode: encode(b"v", b"k", 0, {"n" * 70_000: b"x"})),
    ("value bytearray", lambda encode: encode(bytearray(b"v"), b"k", 0, None)),
    ("key memoryview", lambda encode: encode(b"v", memoryview(b"k"), 0, None)),
    ("timestamp float", lambda encode: encode(b"v", b"k", 1.5, None)),
    ("headers mapping proxy", lambda encode: encode(b"v", b"k", 0, EMPTY_HEADERS)),
    ("tag empty", lambda encode: encode(b"v", b"k", 0, None, "")),
    ("tag too long", lambda encode: encode(b"v", b"k", 0, None, "t" * 256)),
    ("tag of 255 bytes", lambda encode: encode(b"v", b"k", 0, None, "é" * 127 + "t")),
    ("tag of 256 bytes", lambda encode: encode(b"v", b"k", 0, None, "é" * 128)),
    ("tag bytes", lambda encode: encode(b"v", b"k", 0, None, b"t")),
    ("tag surrogate", lambda encode: encode(b"v", b"k", 0, None, "\udc80")),
    ("tag with headers", lambda encode: encode(b"v", b"k", 0, {"h": b"x"}, "t")),
]


@pytest.mark.parametrize("call", [c for _, c in BAD_ENCODINGS], ids=[n for n, _ in BAD_ENCODINGS])
def test_unusual_input_is_encoded_or_refused_as_the_reference_does(
    call: Callable[[Callable[..., object]], object],
) -> None:
    def as_batch(encode_record: Callable[..., object]) -> Callable[..., object]:
        def batch(value: object, key: object, stamp: object, hdrs: object) -> object:
            return (core.encode_batch if encode_record is core.encode_record else reference.encode_batch)(
                [value], [key], [stamp], [hdrs]
            )

        return batch

    assert outcome(lambda: call(as_batch(core.encode_record))) == outcome(
        lambda: call(as_batch(reference.encode_record))
    )


@given(
    st.lists(
        st.tuples(values, st.one_of(st.text(max_size=20), st.binary(max_size=20)), timestamps, headers, tags),
        max_size=30,
    ),
    st.integers(min_value=1, max_value=16),
    st.integers(min_value=0, max_value=2**62),
)
def test_encode_records_places_hashes_and_encodes_as_the_reference(
    batch: list[tuple[bytes, str | bytes, int, dict[str, bytes], str | None]], partition_count: int, now: int
) -> None:
    items: list[Record | bytes] = [Record(v, key=k, headers=h, timestamp=t, tag=tag) for v, k, t, h, tag in batch]
    encoded = core.encode_records(items, now, partition_count)
    if not core.COMPILED:
        assert encoded is None  # the producer's Python path encodes every batch
        return
    assert encoded is not None
    records, stamps, partitions, hashes, largest, total = encoded
    raw_keys = [k.encode() if isinstance(k, str) else k for _, k, _, _, _ in batch]
    assert records == [
        reference.encode_record(v, raw, t, h, 0, tag) for (v, _, t, h, tag), raw in zip(batch, raw_keys, strict=True)
    ]
    assert stamps == [t for _, _, t, _, _ in batch]
    assert partitions == [reference_fnv1_32(raw) % partition_count for raw in raw_keys]
    assert list(hashes) == list(map(zlib.crc32, raw_keys))
    assert keyindex.pack_hashes(hashes) == keyindex.pack_hashes(list(map(zlib.crc32, raw_keys)))  # the column's bytes
    assert largest == max(map(len, records), default=0)
    assert total == sum(map(len, records))


@given(
    st.one_of(values, st.just(bytearray(b"not bytes"))),
    st.one_of(st.text(max_size=20), st.binary(max_size=20)),
    timestamps,
    st.one_of(st.none(), headers),
    st.one_of(tags, st.text(min_size=250, max_size=300)),
    st.integers(min_value=1, max_value=16),
    st.integers(min_value=0, max_value=600),
)
def test_encode_push_places_and_encodes_as_the_reference(
    value: bytes,
    key: str | bytes,
    timestamp_ns: int,
    hdrs: dict[str, bytes] | None,
    tag: str | None,
    partition_count: int,
    max_bytes: int,
) -> None:
    """One push's record, partition and key hash are the reference's; what it does not take plainly
    (an error, a record over the limit) it leaves to the producer's Python path."""
    if not core.COMPILED:
        assert core.raw_encode_push is None  # the producer's Python path encodes every push
        return
    assert core.raw_encode_push is not None
    encoded = core.raw_encode_push(value, key, timestamp_ns, hdrs, tag, partition_count, max_bytes)
    expected = outcome(
        lambda: core.reference_encode_push(value, key, timestamp_ns, hdrs, tag, partition_count, max_bytes)
    )
    if encoded is NotImplemented:  # the producer converts a bytearray value itself
        refused = expected is None or (isinstance(expected, tuple) and isinstance(expected[0], str))
        assert refused or type(value) is not bytes, expected
    else:
        assert encoded == expected


@pytest.mark.parametrize("keyless", [None, reference.KEYLESS, 0])
def test_encode_push_gives_a_keyless_push_a_random_key(keyless: int | None) -> None:
    """A push without a key gets 8 random bytes as its key, placed and hashed as any key is, and
    its record the keyless attribute bit (format 5, the default) or none (a stream before it)."""
    if not core.COMPILED:
        assert core.raw_encode_push is None
        return
    assert core.raw_encode_push is not None
    seen = set()
    extra = () if keyless is None else (keyless,)
    for _ in range(50):
        encoded = core.raw_encode_push(b"v", None, 7, None, None, 5, 2**20, *extra)
        assert encoded is not NotImplemented
        record, partition, key_hash = encoded
        (message,) = reference.decode_messages(record, 0, 0, 1)
        assert len(message.key) == 8
        assert (partition, key_hash) == (reference_fnv1_32(message.key) % 5, zlib.crc32(message.key))
        attributes = reference.KEYLESS if keyless is None else keyless
        assert record == reference.encode_record(b"v", message.key, 7, None, attributes)
        seen.add(message.key)
    assert len(seen) == 50
    with pytest.raises(ValueError, match="keyless is 0"):
        core.raw_encode_push(b"v", None, 7, None, None, 5, 2**20, 3)


def test_encode_records_fills_in_missing_timestamps_and_keys() -> None:
    encoded = core.encode_records([b"plain", Record(b"v")], 1234, 4)
    if not core.COMPILED:
        assert encoded is None
        return
    assert encoded is not None
    records, stamps, partitions, hashes, _, _ = encoded
    assert stamps == [1234, 1234]
    for record, partition, key_hash in zip(records, partitions, hashes, strict=True):
        decoded = reference.decode_record(record)
        assert not isinstance(decoded, reference.NeedMore)
        assert len(decoded.key) == 8  # a random key, as go-diskq gives keyless messages
        assert partition == reference_fnv1_32(decoded.key) % 4
        assert key_hash == zlib.crc32(decoded.key)


def test_encode_records_takes_a_now_out_of_range_only_where_no_record_needs_it() -> None:
    """A ``now`` that does not fit in an i64 is no record's timestamp when each brings its own; one
    without a timestamp leaves the batch to the producer's Python path (which raises its error)."""
    now = 2**63
    encoded = core.encode_records([Record(b"v", key=b"k", timestamp=5), Record(b"w", timestamp=6)], now, 1)
    if not core.COMPILED:
        assert encoded is None
        return
    assert encoded is not None
    assert encoded[0] == [reference.encode_record(b"v", b"k", 5), encoded[0][1]]
    assert encoded[1] == [5, 6]
    assert core.encode_records([Record(b"v", timestamp=5), Record(b"w")], now, 1) is None


def test_encode_records_lists_are_left_out_of_the_gc() -> None:
    """push_many's columns of bytes and ints are never walked by the cyclic GC's collections."""
    encoded = core.encode_records([Record(b"v", key="k", headers={"h": b"x"}, timestamp=3), b"w"], 7, 4)
    if not core.COMPILED:
        assert encoded is None
        return
    assert encoded is not None
    assert not any(map(gc.is_tracked, encoded[:3]))  # the key hashes are an array("I"): no items to walk


@pytest.mark.parametrize(
    "items",
    [[bytearray(b"v")], [Record(b"v", timestamp=adiskq.Message(0, 0, 0, b"", b"").timestamp)], [Record(b"v", key=1)]],  # type: ignore[arg-type]
    ids=["bytearray item", "datetime timestamp", "int key"],
)
def test_encode_records_leaves_what_it_does_not_take_to_the_producer(items: list[Record | bytes]) -> None:
    assert core.encode_records(items, 0, 1) is None


@given(
    st.lists(
        st.one_of(
            st.tuples(values, st.one_of(st.text(max_size=20), st.binary(max_size=20)), timestamps, headers, tags).map(
                lambda f: Record(f[0], key=f[1], headers=f[3] or None, timestamp=f[2], tag=f[4])
            ),
            st.tuples(values, st.binary(max_size=20)).map(lambda f: Record(f[0], key=f[1])),  # the call's timestamp
        ),
        max_size=30,
    ),
    st.integers(min_value=0, max_value=2**62),
    st.integers(min_value=0, max_value=4000),
)
def test_pack_records_is_the_references(items: list[Record | bytes], now: int, max_total: int) -> None:
    """push_many's packed batch: the same .data bytes, entries, key and tag columns as the reference
    (which encodes each record alone), and the same refusal of a batch over the size given."""
    packed = core.pack_records(items, now, max_total)
    expected = core.reference_pack_records(items, now, max_total)
    if not core.COMPILED:
        assert packed is None  # the producer's Python path encodes every batch
        return
    assert packed == expected


@pytest.mark.parametrize("keyless", [reference.KEYLESS, 0])
def test_pack_records_gives_keyless_records_random_keys(keyless: int) -> None:
    """A value alone, or a Record without a key, gets 8 random bytes as its key, hashed as any key,
    and the ``keyless`` attribute bits; a Record with a key gets none."""
    items: list[Record | bytes] = [b"plain", Record(b"v", timestamp=5), Record(b"k", key=b"key")]
    packed = core.pack_records(items, 1234, 2**20, keyless)
    if not core.COMPILED:
        assert packed is None
        return
    assert packed is not None
    messages = reference.decode_messages(packed.data, 0, 0, 3)
    assert [m.timestamp_ns for m in messages] == [1234, 5, 1234]
    assert all(len(m.key) == 8 for m in messages[:2])
    assert messages[0].key != messages[1].key
    attributes = []
    at = 0
    for _ in range(3):
        attributes.append(packed.data[at + reference.ATTRIBUTES_AT])
        at += int.from_bytes(packed.data[at : at + 4], "little")
    assert attributes == [keyless, keyless, 0]
    rebuilt = b"".join(
        reference.encode_record(value, m.key, m.timestamp_ns, None, attribute)
        for value, m, attribute in zip([b"plain", b"v", b"k"], messages, attributes, strict=True)
    )
    assert packed.data == rebuilt


@pytest.mark.parametrize("key", ["customer-001", "", "é-ü", "\U0001f600", b"raw\xff"])
@pytest.mark.parametrize("tag", [None, "red"])
def test_pack_records_keys_and_tag_column(key: str | bytes, tag: str | None) -> None:
    """An ASCII key, a non-ASCII one and bytes are packed as the reference packs them; a batch in which
    no record carries a tag has no tag column (b""), one with a tag has an entry a record."""
    items: list[Record | bytes] = [Record(b"v", key=key), Record(b"w", key=key, tag=tag)]
    expected = core.reference_pack_records(items, 5, 2**20)
    assert expected is not None
    assert expected.tag_entries == (b"" if tag is None else bytes(4) + reference_tags.tag_entry(tag))
    packed = core.pack_records(items, 5, 2**20)
    if not core.COMPILED:
        assert packed is None
        return
    assert packed == expected


@pytest.mark.parametrize(
    "items",
    [
        [Record(b"v", key=b"k"), bytearray(b"v")],
        [Record(b"v", timestamp=adiskq.Message(0, 0, 0, b"", b"").timestamp)],  # type: ignore[arg-type]
        [Record(b"v", key=1)],  # type: ignore[arg-type]
        [Record(b"v", key=b"k"), Record(b"v", timestamp=2**63)],
        [Record(b"v", tag="")],
        [Record(b"v", headers={"h": "not bytes"})],  # type: ignore[dict-item]
    ],
    ids=["bytearray item", "datetime timestamp", "int key", "timestamp out of range", "empty tag", "str header"],
)
def test_pack_records_leaves_what_it_does_not_take_to_the_producer(items: list[Record | bytes]) -> None:
    """Anything the compiled encoder does not take plainly goes to the producer's other paths (which
    encode it, or raise the reference's error)."""
    assert core.pack_records(items, 0, 2**20) is None
    assert core.encode_records(items, 0, 1) is None


@given(
    st.integers(min_value=0, max_value=2**40), st.integers(min_value=0, max_value=2**40), st.lists(fields, max_size=10)
)
def test_index_entries_are_the_references(first: int, start: int, batch: list[Fields]) -> None:
    records = [reference.encode_record(v, k, t, h, 0, tag) for v, k, t, h, tag in batch]
    stamps = [t for _, _, t, _, _ in batch]
    assert core.index_entries(first, start, records, stamps) == core.reference_index_entries(
        first, start, records, stamps
    )


@given(
    st.integers(min_value=0, max_value=1000),
    st.integers(min_value=0, max_value=2**62),
    st.integers(min_value=0, max_value=50),
)
def test_receipts_are_the_references(partition: int, first: int, count: int) -> None:
    made = core.receipts(partition, first, count)
    assert made == core.reference_receipts(partition, first, count)
    assert all(type(receipt) is Receipt for receipt in made)


_receipt_fields = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.booleans(),
    st.floats(allow_nan=False),
    st.none(),
    st.text(max_size=3),
    st.tuples(st.integers(), st.integers()),
)


@given(_receipt_fields, _receipt_fields)
def test_a_single_receipt_is_the_references(partition: object, offset: object) -> None:
    """A single push's Receipt is the reference's, and so is the TypeError for what is not an int."""
    try:
        expected: object = core.reference_receipt(partition, offset)  # type: ignore[arg-type]
    except TypeError as error:
        with pytest.raises(TypeError, match=re.escape(str(error))):
            core.receipt(partition, offset)  # type: ignore[arg-type]
        return
    made = core.receipt(partition, offset)  # type: ignore[arg-type]
    assert made == expected
    assert type(made) is Receipt
    assert hash(made) == hash(expected)


def test_single_receipts_dropped_are_reused_and_start_no_collection() -> None:
    """A single push's Receipt comes off the free list the dropped ones went to: untracked, and no
    allocation the cyclic GC counts (a push a Receipt would otherwise start collections of its own)."""
    [core.receipt(0, offset) for offset in range(10)].clear()  # dropped: on the free list
    gc.disable()
    try:
        before = gc.get_count()[0]
        kept = [core.receipt(2, offset) for offset in range(2**63 - 5, 2**63 + 5)]
        allocated = gc.get_count()[0] - before
    finally:
        gc.enable()
    assert kept == [(2, offset) for offset in range(2**63 - 5, 2**63 + 5)]
    if core.COMPILED:
        assert allocated <= 1  # the list; the receipts came from the free list
        assert not any(map(gc.is_tracked, kept))


def test_receipts_of_a_dropped_batch_are_reused_whole_by_the_next() -> None:
    """push_many's receipts come from the ones the caller dropped, each a whole, fresh Receipt, and
    making them starts no collection of the cyclic GC (whose young generation counts allocations)."""
    core.receipts(3, 10, 500).clear()  # the caller drops a batch's receipts
    gc.disable()  # the count below still moves with each allocation; no collection resets it
    try:
        before = gc.get_count()[0]
        again = core.receipts(4, 2**63 - 50, 100)  # past 2**63 - 1 too (summed as Python ints)
        allocated = gc.get_count()[0] - before
    finally:
        gc.enable()
    if core.COMPILED:
        assert allocated <= 1  # the list; the receipts came from the free list
    assert again == [(4, 2**63 - 50 + i) for i in range(100)]
    assert [hash(receipt) for receipt in again] == [hash((4, 2**63 - 50 + i)) for i in range(100)]
    assert not any(map(gc.is_tracked, again)) or not core.COMPILED


def test_receipts_built_by_hand_and_by_a_subclass_are_freed_as_tuples() -> None:
    """Receipt(...), a subclass's instances and receipts holding other objects free as any tuple does."""

    class Numbered(Receipt):
        __slots__ = ()

    class Noted(Receipt):
        pass

    freed: list[str] = []

    class Watched(int):
        def __del__(self) -> None:
            freed.append("offset")

    for _ in range(3):
        built = [Receipt(1, 2), Numbered(3, 4), Noted(5, 6), Receipt(7, Watched(8))]
        built[2].note = built  # type: ignore[attr-defined]  # a cycle only the GC frees
        assert gc.is_tracked(built[0])
        del built
        gc.collect()
    assert freed == ["offset"] * 3
    assert core.receipts(0, 0, 3) == [(0, 0), (0, 1), (0, 2)]


# -- decoding and scanning -------------------------------------------------------------------------


def damaged(buffer: bytes, data: st.DataObject) -> bytes:
    """The buffer with a few bytes changed, cut short, or grown by random bytes."""
    out = bytearray(buffer)
    for _ in range(data.draw(st.integers(min_value=0, max_value=3))):
        if out:
            at = data.draw(st.integers(min_value=0, max_value=len(out) - 1))
            out[at] = data.draw(st.integers(min_value=0, max_value=255))
    how = data.draw(st.sampled_from(["keep", "cut", "grow"]))
    if how == "cut" and out:
        del out[data.draw(st.integers(min_value=0, max_value=len(out) - 1)) :]
    elif how == "grow":
        out += data.draw(st.binary(max_size=40))
    return bytes(out)


def same_messages(got: object, expected: object) -> None:
    assert got == expected
    if isinstance(got, list):
        assert [type(m) for m in got] == [type(m) for m in expected]  # type: ignore[attr-defined]


@settings(max_examples=300)
@given(st.lists(fields, max_size=12), st.integers(min_value=0, max_value=3), st.data())
def test_decode_messages_answers_as_the_reference(batch: list[Fields], extra: int, data: st.DataObject) -> None:
    buffer = damaged(records_buffer(batch), data)
    count = max(0, len(batch) + data.draw(st.integers(min_value=-1, max_value=1)))
    limit = data.draw(st.sampled_from([reference.DEFAULT_MAX_RECORD_BYTES, 30, 100, 400]))
    first = data.draw(st.integers(min_value=0, max_value=2**62))
    # a sealed segment's records arrive as a view of its mapping: decoded as the same bytes are
    view = data.draw(st.booleans())
    given_buffer = memoryview(buffer) if view else buffer
    same_messages(
        outcome(lambda: core.decode_messages(given_buffer, extra, first, count, max_record_bytes=limit)),
        outcome(lambda: reference.decode_messages(buffer, extra, first, count, max_record_bytes=limit)),
    )


@given(st.binary(max_size=400), st.integers(min_value=0, max_value=20), st.booleans())
def test_decode_messages_of_random_bytes_fails_as_the_reference(data: bytes, count: int, view: bool) -> None:
    given_data = memoryview(data) if view else data
    assert outcome(lambda: core.decode_messages(given_data, 0, 0, count)) == outcome(
        lambda: reference.decode_messages(data, 0, 0, count)
    )


def test_a_view_that_is_not_one_run_of_bytes_is_decoded_by_the_reference() -> None:
    """A strided view (no mapped segment gives one) is copied for the reference, which decodes it."""
    buffer = records_buffer([(b"value", b"key", 7, {})] * 3)
    strided = memoryview(bytes(b for byte in buffer for b in (byte, 0)))[::2]
    assert core.decode_messages(strided, 1, 5, 3) == reference.decode_messages(buffer, 1, 5, 3)


def scanned(scan: Callable[[], reference.ScannedRecords]) -> object:
    result = scan()
    error = None if result.error is None else (str(result.error), result.error.position)
    return result.positions, result.sizes, result.timestamps, result.end, error


@settings(max_examples=300)
@given(st.lists(fields, max_size=12), st.data())
def test_scan_columns_answers_as_the_reference(batch: list[Fields], data: st.DataObject) -> None:
    buffer = damaged(records_buffer(batch), data)
    start = data.draw(st.integers(min_value=0, max_value=len(buffer)))
    limit = data.draw(st.sampled_from([reference.DEFAULT_MAX_RECORD_BYTES, 30, 100, 400]))
    assert scanned(lambda: core.scan_columns(buffer, start, max_record_bytes=limit)) == scanned(
        lambda: reference.scan_columns(buffer, start, max_record_bytes=limit)
    )


@given(st.binary(max_size=600))
def test_scanning_random_bytes_answers_as_the_reference(data: bytes) -> None:
    assert scanned(lambda: core.scan_columns(data)) == scanned(lambda: reference.scan_columns(data))


@settings(max_examples=300)
@given(st.lists(fields, max_size=8), st.data())
def test_next_valid_record_answers_as_the_reference(batch: list[Fields], data: st.DataObject) -> None:
    buffer = damaged(data.draw(st.binary(max_size=30)) + records_buffer(batch), data)
    start = data.draw(st.integers(min_value=0, max_value=len(buffer) + 2))
    assert core.next_valid_record(buffer, start) == reference.next_valid_record(buffer, start)


@given(st.binary(max_size=12), st.binary(max_size=8))
def test_header_names_are_utf8_exactly_as_python_decodes_them(name: bytes, value: bytes) -> None:
    """The C decoder's own UTF-8 check takes and refuses exactly what Python's decoder does."""
    body = bytearray(struct.pack("<BBqI", reference.MAGIC_V1, 0, 0, 0))
    body += struct.pack("<HH", 1, len(name)) + name + struct.pack("<I", len(value)) + value
    record = struct.pack("<II", len(body) + 8, crc32c_package.crc32c(bytes(body))) + bytes(body)
    assert outcome(lambda: core.decode_messages(record, 0, 0, 1)) == outcome(
        lambda: reference.decode_messages(record, 0, 0, 1)
    )
    assert scanned(lambda: core.scan_columns(record)) == scanned(lambda: reference.scan_columns(record))


@given(st.binary(max_size=12), st.binary(max_size=8), st.integers(min_value=0, max_value=20))
def test_tags_are_utf8_and_bounded_exactly_as_the_reference_decodes_them(tag: bytes, value: bytes, slack: int) -> None:
    """A tag field that is not UTF-8, or whose length overruns the record, is refused by both the same way."""
    body = bytearray(struct.pack("<BBqI", reference.MAGIC_V1, reference.TAGGED, 0, 0))
    body += struct.pack("<H", max(0, len(tag) + 10 - slack)) + tag + b"\x00\x00" + value
    record = struct.pack("<II", len(body) + 8, crc32c_package.crc32c(bytes(body))) + bytes(body)
    assert outcome(lambda: core.decode_messages(record, 0, 0, 1)) == outcome(
        lambda: reference.decode_messages(record, 0, 0, 1)
    )
    assert scanned(lambda: core.scan_columns(record)) == scanned(lambda: reference.scan_columns(record))


def test_a_tagged_record_decodes_to_its_tag_and_an_untagged_one_is_unchanged() -> None:
    """Tagged records carry their tag back; untagged ones are byte for byte format 1's records."""
    untagged = reference.encode_record(b"v", b"k", 5, {"h": b"x"})
    assert reference.encode_record(b"v", b"k", 5, {"h": b"x"}, 0, None) == untagged
    assert untagged[reference.ATTRIBUTES_AT] == 0
    tagged = reference.encode_record(b"v", b"k", 5, {"h": b"x"}, 0, "paid")
    assert tagged[reference.ATTRIBUTES_AT] == reference.TAGGED
    assert len(tagged) == len(untagged) + 2 + 4
    for decode in (core.decode_messages, reference.decode_messages):
        first, second = decode(untagged + tagged, 1, 10, 2)
        assert first == Message(1, 10, 5, b"k", b"v", {"h": b"x"}, None)
        assert second == Message(1, 11, 5, b"k", b"v", {"h": b"x"}, "paid")
    # the batch decoder's column path (many same-sized records) sees the tag too
    many = [reference.encode_record(b"v", b"k", 5, None, 0, "t")] * 9
    assert {m.tag for m in core.decode_messages(b"".join(many), 0, 0, 9)} == {"t"}
    assert {m.tag for m in reference.decode_messages(b"".join(many), 0, 0, 9)} == {"t"}


# -- the messages themselves -----------------------------------------------------------------------


def test_messages_without_headers_are_not_tracked_by_the_gc() -> None:
    buffer = records_buffer([(b"value", b"key", 7, {})] * 10)
    messages = core.decode_messages(buffer, 2, 100, 10)
    if core.COMPILED:
        assert not any(map(gc.is_tracked, messages))
    assert all(message.headers is EMPTY_HEADERS for message in messages)


def test_messages_keep_the_public_api() -> None:
    buffer = records_buffer([(b"v", b"k", 5, {}), (b"w", b"j", 6, {"h": b"x"})])
    plain, with_headers = core.decode_messages(buffer, 3, 40, 2)
    assert type(plain) is Message
    assert plain == Message(3, 40, 5, b"k", b"v")
    assert hash(plain) == hash(Message(3, 40, 5, b"k", b"v"))  # a message without headers is hashable
    partition, offset, timestamp_ns, key, value, hdrs, tag = plain  # seven fields since tags
    assert (partition, offset, timestamp_ns, key, value, dict(hdrs), tag) == (3, 40, 5, b"k", b"v", {}, None)
    assert repr(plain) == "Message(partition=3, offset=40, timestamp_ns=5, key=b'k', value=b'v', headers={}, tag=None)"
    assert pickle.loads(pickle.dumps(plain)) == plain
    assert pickle.loads(pickle.dumps(with_headers)) == with_headers
    assert with_headers.headers == {"h": b"x"}
    assert gc.is_tracked(with_headers)  # its headers are a dict a user may change
    assert plain.timestamp == Message(3, 40, 5, b"k", b"v").timestamp


def test_messages_are_whole_after_earlier_ones_are_freed() -> None:
    """Batches decoded after earlier ones were dropped (the compiled core reuses their tuples) are
    the reference's messages, and the objects they share are neither leaked nor released early."""
    batch = [(b"value-%d" % i, b"key-%d" % i, i, {"h": b"x"} if i % 7 == 0 else {}) for i in range(3000)]
    buffer = records_buffer(batch)
    expected = reference.decode_messages(buffer, 1, 10, len(batch))
    assert core.decode_messages(buffer, 1, 10, len(batch)) == expected  # warm: what is kept is kept
    shared = (EMPTY_HEADERS, Message, None)
    # None's count moves with any object the process frees: a collection of earlier tests' garbage
    # in the loop moved it by thousands under the sanitizers. Collected first, none during.
    gc.collect()
    gc.disable()
    try:
        counts = [sys.getrefcount(thing) for thing in shared]
        for _ in range(5):
            assert core.decode_messages(buffer, 1, 10, len(batch)) == expected
        assert [sys.getrefcount(thing) for thing in shared] == counts
    finally:
        gc.enable()


def test_messages_made_by_python_and_subclasses_are_freed_as_tuples() -> None:
    """Messages built in Python, GC-untracked or not, and instances of a subclass of Message are
    freed as tuples are: their items released once, the type's reference count back where it was."""

    class Annotated(Message):
        note: str = ""  # a class attribute: a NamedTuple subclass adds no fields

    value, key = b"a value of its own", b"a key of its own"
    counts = sys.getrefcount(Message), sys.getrefcount(Annotated), sys.getrefcount(value)
    for _ in range(3000):
        made = Message(0, 1, 2, key, value)
        gc.collect(0)  # may untrack it: every item is untracked
        annotated = Annotated(0, 1, 2, key, value, {"h": b"x"})
        assert annotated.value is made.value is value
        del made, annotated
    assert (sys.getrefcount(Message), sys.getrefcount(Annotated), sys.getrefcount(value)) == counts


def test_the_core_takes_any_mapping_of_headers_the_reference_takes() -> None:
    class Headers(Mapping[str, bytes]):
        def __getitem__(self, name: str) -> bytes:
            return {"a": b"1"}[name]

        def __iter__(self):  # type: ignore[no-untyped-def]
            return iter(["a"])

        def __len__(self) -> int:
            return 1

    assert core.encode_record(b"v", b"k", 0, Headers()) == reference.encode_record(b"v", b"k", 0, Headers())


class PythonRecord(NamedTuple):
    """adiskq.Record as NamedTuple writes it, constructor and all: what the compiled one must match."""

    value: bytes
    key: str | bytes | None = None
    headers: Mapping[str, bytes] | None = None
    timestamp: object = None
    tag: str | None = None


RECORD_CALLS: list[tuple[tuple[object, ...], dict[str, object]]] = [
    ((b"v",), {}),
    ((b"v", "k"), {}),
    ((b"v", b"k", {"h": b"x"}, 5), {}),
    ((b"v",), {"key": "k", "timestamp": 7}),
    ((), {"value": b"v", "headers": None}),
    ((), {}),
    ((b"v", "k", None, 1, "t"), {}),
    ((b"v",), {"tag": "t"}),
    ((b"v", "k", None, 1, "t", 2), {}),
    ((b"v",), {"nope": 1}),
    ((b"v",), {"value": b"w"}),
]


@pytest.mark.parametrize(("args", "kwargs"), RECORD_CALLS)
def test_record_is_built_as_the_namedtuple_builds_it(args: tuple[object, ...], kwargs: dict[str, object]) -> None:
    def build(cls: type[tuple[object, ...]]) -> object:
        try:
            return tuple(cls(*args, **kwargs))
        except TypeError:
            return TypeError

    assert build(Record) == build(PythonRecord)


def test_record_keeps_its_namedtuple_api() -> None:
    record = Record(b"v", key="k")
    assert type(record) is Record
    assert record._replace(key="x") == Record(b"v", "x")
    assert pickle.loads(pickle.dumps(record)) == record
    assert record._asdict() == {"value": b"v", "key": "k", "headers": None, "timestamp": None, "tag": None}
    assert list(inspect.signature(Record).parameters) == ["value", "key", "headers", "timestamp", "tag"]


def test_a_subclass_of_record_is_built_by_its_own_new_and_init() -> None:
    """Record's compiled call path is Record's alone: a user's subclass runs its own constructor."""
    built: list[object] = []

    class Order(Record):
        def __new__(cls, value: bytes, order_id: str) -> Order:
            return super().__new__(cls, value, key=f"order-{order_id}")

        def __init__(self, value: bytes, order_id: str) -> None:
            built.append(order_id)

    order = Order(b"v", "42")
    assert type(order) is Order
    assert order == (b"v", "order-42", None, None, None)
    assert built == ["42"]
    assert Record.__new__(Record, b"v", "k") == Record(b"v", "k")


def test_records_that_cannot_form_cycles_are_not_tracked_by_the_gc() -> None:
    """push_many's callers build thousands of Records a batch; those of atoms are left out of the GC."""
    atoms = [Record(b"v"), Record(b"v", key="k"), Record(b"v", b"k", None, 5), Record(b"v", tag="paid")]
    may_cycle = [Record(b"v", headers={"h": b"x"}), Record([], key="k"), Record(b"v", timestamp=object())]  # type: ignore[arg-type]
    if core.COMPILED:
        assert not any(map(gc.is_tracked, atoms))
    assert all(map(gc.is_tracked, may_cycle))


def test_records_of_a_dropped_batch_are_reused_whole_by_the_next() -> None:
    """A push_many batch's Records come from those the caller dropped, each a whole, fresh Record,
    and building them starts no collection of the cyclic GC (whose young generation counts allocations)."""
    [Record(b"old", key=b"k", timestamp=i, tag="t") for i in range(500)].clear()  # the caller drops a batch
    gc.disable()  # the count below still moves with each allocation; no collection resets it
    try:
        before = gc.get_count()[0]
        again = [Record(b"v%d" % i, b"k%d" % i) for i in range(100)]
        allocated = gc.get_count()[0] - before
    finally:
        gc.enable()
    if core.COMPILED:
        assert allocated <= 1  # the list; the Records came from the free list
        assert not any(map(gc.is_tracked, again))
    assert again == [(b"v%d" % i, b"k%d" % i, None, None, None) for i in range(100)]
    assert [hash(record) for record in again] == [hash((b"v%d" % i, b"k%d" % i, None, None, None)) for i in range(100)]
    assert all(type(record) is Record for record in again)


def test_records_of_a_subclass_and_records_that_may_cycle_are_freed_as_tuples() -> None:
    """A subclass's Records, Records with headers, and Records holding objects with finalizers free as
    any tuple does (their finalizers run), and the free list hands out only whole, plain Records."""

    class Slotted(Record):
        __slots__ = ()

    class Noted(Record):
        pass

    freed: list[str] = []

    class Watched(bytes):
        def __del__(self) -> None:
            freed.append("value")

    for _ in range(3):
        built = [Slotted(b"a"), Noted(b"b"), Record(b"c", headers={"h": b"x"}), Record(Watched(b"d"), key="k")]
        built[1].note = built  # type: ignore[attr-defined]  # a cycle only the GC frees
        del built
        gc.collect()
    assert freed == ["value"] * 3
    assert [Record(b"v", key="k", tag="t") for _ in range(3)] == [(b"v", "k", None, None, "t")] * 3
    assert type(Slotted(b"x")) is Slotted
    assert Slotted(b"x") == (b"x", None, None, None, None)


@given(
    st.lists(st.sampled_from([0, 1, 7, 2**32 - 1, 12345]), max_size=60),
    st.sets(st.sampled_from([0, 1, 7, 99]), max_size=3),
    st.binary(max_size=3),
)
def test_matching_entries_are_the_references(hashes: list[int], wanted: set[int], partial: bytes) -> None:
    """The filtering consumer's scan of a tag column finds the same entries in both cores (a partial
    trailing entry ignored)."""
    column = struct.pack(f"<{len(hashes)}I", *hashes) + partial
    expected = [i for i, value in enumerate(hashes) if value in wanted]
    assert core.matching_entries(column, tuple(sorted(wanted))) == expected
    assert reference_tags.matching_entries(column, tuple(sorted(wanted))) == expected


@settings(max_examples=200)
@given(st.lists(fields, max_size=10), st.data())
def test_decode_at_answers_as_the_reference(batch: list[Fields], data: st.DataObject) -> None:
    """Records of scattered offsets (a filtered read's candidates) decode as the reference decodes them,
    damaged or not, each message numbered by its own offset."""
    buffer = damaged(records_buffer(batch), data)
    offsets = sorted(
        data.draw(st.sets(st.integers(min_value=0, max_value=10**6), min_size=len(batch), max_size=len(batch)))
    )
    same_messages(
        outcome(lambda: core.decode_at(buffer, 2, offsets)),
        outcome(lambda: core.reference_decode_at(buffer, 2, offsets)),
    )


# -- the sealed key index's sorted column (log/keyindex.c) ----------------------------------------------


@given(st.lists(st.integers(0, 2**32 - 1), max_size=3000), st.booleans(), st.sampled_from([0, 3, 9, 12]))
def test_the_sorted_key_column_is_the_references(hashes: list[int], unique: bool, block_shift: int) -> None:
    column = keyindex.pack_hashes(hashes)
    layout = keyindex.layout(len(hashes), block_shift)
    assert keyindex.sorted_values(column, layout, unique) == keyindex.reference_sorted_values(column, layout, unique)


@pytest.mark.parametrize("count", [1, 4096, 4097, 300_000])
def test_a_segment_sized_key_column_seals_as_the_reference_seals_it(count: int) -> None:
    """Both layouts, at the sizes where blocks start to count; repeated keys included."""
    rng = random.Random(count)
    hashes = [zlib.crc32(b"key-%d" % rng.randrange(count)) for _ in range(count)]
    column = keyindex.pack_hashes(hashes)
    for layout in {keyindex.layout(count, 12), keyindex.layout(count, 9)}:
        for unique in (False, True):
            compiled = keyindex.sorted_values(column, layout, unique)
            assert compiled == keyindex.reference_sorted_values(column, layout, unique)


def test_a_layout_outside_the_format_is_left_to_the_reference() -> None:
    if not core.COMPILED:
        assert core.raw_sorted_key_values is None
        return
    assert core.raw_sorted_key_values is not None
    column = keyindex.pack_hashes([1, 2, 3])
    assert core.raw_sorted_key_values(column, 20, 5, 0, False) is NotImplemented  # 25 bits, not 30
    assert core.raw_sorted_key_values(column, 30, 0, 0, False) is NotImplemented  # 3 blocks in 0 bits


def test_the_compiled_decoder_leaves_kafkas_headers_to_the_reference() -> None:
    """A record with a null header value or a repeated name (whose Message holds a Headers) makes
    the compiled decoders answer NotImplemented: the reference decodes the buffer
    (test_header_list.py checks that the two then give the same Messages)."""
    from adiskq import _compiled

    repeated = reference.encode_record(b"v", b"k", 1, Headers([("a", b"1"), ("a", b"1")]))
    null = reference.encode_record(b"v", b"k", 1, Headers([("a", None)]))
    plain = reference.encode_record(b"v", b"k", 1, {"a": b"1"})
    for data, count in ((repeated, 1), (null, 1), (plain + repeated + null, 3)):
        assert _compiled.decode_messages(data, 0, 0, count, 2**30) is NotImplemented
        assert _compiled.decode_at(data, 0, [3] * count, 2**30) is NotImplemented


@pytest.mark.parametrize("keyless", [reference.KEYLESS, 0])
def test_encode_records_marks_the_records_given_no_key(keyless: int) -> None:
    """push_many's compiled encoding gives a record without a key the ``keyless`` attribute bits,
    as the reference's step by step path does, and a record with one none."""
    encoded = core.encode_records([b"plain", Record(b"v", key=b"k")], 1234, 4, None, keyless)
    if not core.COMPILED:
        assert encoded is None
        return
    assert encoded is not None
    records = encoded[0]
    assert [record[reference.ATTRIBUTES_AT] for record in records] == [keyless, 0]
    key = reference.record_key(records[0])
    assert records[0] == reference.encode_record(b"plain", key, 1234, None, keyless)
    assert core.reference_encode_push(b"v", None, 1, None, None, 1, 2**20, keyless) is not None
    record, _, _ = core.reference_encode_push(b"v", None, 1, None, None, 1, 2**20, keyless)  # type: ignore[misc]
    assert record[reference.ATTRIBUTES_AT] == keyless


def test_keyless_records_decode_on_the_plain_paths_alike() -> None:
    """A keyless record (attributes bit 4) is a plain record to both decoders: its generated key is
    its Message's key, in a batch of one size too (the uniform path)."""
    records = [reference.encode_record(b"v%02d" % i, b"%08d" % i, i, None, reference.KEYLESS) for i in range(20)]
    buf = b"".join(records)
    expected = [Message(3, 100 + i, i, b"%08d" % i, b"v%02d" % i) for i in range(20)]
    assert core.decode_messages(buf, 3, 100, 20) == expected
    assert reference.decode_messages(buf, 3, 100, 20) == expected
