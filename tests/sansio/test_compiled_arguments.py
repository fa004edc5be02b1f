"""Every function and method the compiled core exposes to Python checks its arguments.

Each one is walked with hostile arguments in every position (negative and huge counts, indexes and
offsets, foreign objects, buffers of wide items, views that are not one run of bytes, sequences
that change while they are read, too few and too many arguments): each call returns or raises a
Python exception, and never reads or writes memory it does not own. ``scripts/sanitize`` runs this
file under AddressSanitizer, where a stray read fails the run even when it does not crash.
"""

from __future__ import annotations

import array
import contextlib
import gc
import os
import pathlib
import random
import struct
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import pytest
from support.compression import stream_dictionary

from adiskq._sansio import codec as reference
from adiskq._sansio import core
from adiskq._sansio import tags as reference_tags
from adiskq._sansio.compression import DICTIONARY_ID_BASE
from adiskq._sansio.native import NATIVE
from adiskq._sansio.values import EMPTY_HEADERS, Message, Receipt, Record
from adiskq.kafka.wire import codec as kafka_reference
from adiskq.kafka.wire.codec import KafkaBatch, KafkaRecord

# The compiled module itself (scripts/test runs this file only where it is built).
compiled: Any = NATIVE


# A Fetch v12 payload naming two topics (two partitions, then one), a forgotten topic and a rack.
FETCH_REQUEST = (
    struct.pack(">iiiibii", -1, 500, 1, 1 << 20, 0, 0, -1)
    + b"\x03"
    + b"\x02a"
    + b"\x03"
    + struct.pack(">iiqiqi", 0, -1, 5, -1, -1, 1 << 20)
    + b"\x00"
    + struct.pack(">iiqiqi", 1, -1, 6, -1, -1, 1 << 20)
    + b"\x00\x00"
    + b"\x02b"
    + b"\x02"
    + struct.pack(">iiqiqi", 0, -1, 7, -1, -1, 1 << 20)
    + b"\x00\x00"
    + b"\x02\x02c\x02"
    + struct.pack(">i", 3)
    + b"\x00"
    + b"\x05rack\x00"
)

# A Produce v9 payload: a transactional id, a topic of two partitions (records, then null), a second topic.
PRODUCE_REQUEST = (
    b"\x03tx"
    + struct.pack(">hi", -1, 30_000)
    + b"\x03"
    + b"\x02a"
    + b"\x03"
    + struct.pack(">i", 0)
    + b"\x06batch\x00"
    + struct.pack(">i", 1)
    + b"\x00\x00\x00"
    + b"\x02b\x01\x00"
    + b"\x00"
)


class Evil:
    """An int-like object whose ``__index__`` empties a list as it is read (a sequence that changes
    under the caller's feet), then answers -1."""

    def __init__(self, victim: list[Any]) -> None:
        self.victim = victim

    def __index__(self) -> int:
        self.victim.clear()
        gc.collect()
        return -1


class BytesSubclass(bytes):
    pass


class ListSubclass(list):  # type: ignore[type-arg]
    pass


def hostile_values() -> list[object]:
    """What a caller may pass instead of a sound argument."""
    wide = memoryview(array.array("I", [0xADADADAD] * 8))
    strided = memoryview(bytes(range(64)))[::3]
    return [
        None,
        object(),
        -1,
        -(2**31),
        -(2**63),
        2**31,
        2**63 - 1,
        2**63,
        2**64,
        2**200,
        1.5,
        "",
        "\udc80",
        b"",
        bytearray(b"\xad" * 40),
        BytesSubclass(b"\xad" * 40),
        wide,
        strided,
        [],
        ListSubclass([b"x"]),
        [None, 1, "x", b"y"],
        (),
        {"a": 1},
        Evil([1, 2, 3]),
        Record,
        tuple,
        int,
    ]


def record_bytes(count: int = 3) -> bytes:
    return b"".join(reference.encode_record(b"v%d" % i, b"k", i, {"h": b"x"} if i % 2 else None) for i in range(count))


def index_entries(count: int = 3) -> bytes:
    return b"".join(struct.pack("<QQQ", 10 + i, 30 * i, 30) for i in range(count))


KAFKA_RECORDS = [KafkaRecord(0, 7, b"k", b"v", [("h", b"x")]), KafkaRecord(1, 8, None, None, [])]


def kafka_batch() -> bytes:
    return kafka_reference.encode_batch(base_offset=5, records=KAFKA_RECORDS, base_timestamp_ms=7)


def kafka_records() -> tuple[bytes, int, int, int]:
    """A batch's records section: the buffer, where it starts and ends, and its record count."""
    encoded, _, _ = kafka_reference.encode_records(KAFKA_RECORDS, 7)
    return encoded, 0, len(encoded), len(KAFKA_RECORDS)


def run_of_records() -> tuple[bytes, bytes, bytes]:
    """A run of stored records (its bytes, its .index and .timeindex entries numbered from 0)."""
    data, index, timeindex, _, _, _ = compiled.kafka_stored_records(*kafka_records(), 7, 1, "adiskq.kafka.null")
    return data, index, timeindex


def kafka_messages() -> list[Message]:
    return [Message(0, 5 + i, 1_000_000 * (7 + i), b"k", b"v%d" % i, EMPTY_HEADERS, None) for i in range(2)]


class Target(NamedTuple):
    """A callable of the compiled core and sound arguments for it; ``sizes`` are the positions of
    counts that ask for that much work (receipts' count): a huge one there would be obeyed, so those
    get no huge positive ints."""

    name: str
    call: Callable[..., object]
    arguments: tuple[object, ...]
    sizes: frozenset[int] = frozenset()


class Plain(NamedTuple):
    a: int
    b: int


def targets(files: tuple[int, int]) -> list[Target]:
    """Every function and Buffer method, with sound arguments each hostile value replaces in turn."""
    records = [reference.encode_record(b"v", b"k", 1), reference.encode_record(b"w", b"j", 2, None, 0, "t")]
    buffer = compiled.Buffer(lambda: None)
    buffer.set([1, 2, 3], 1)
    data_fd, index_fd = files
    prepared = compiled.zstd_prepare(stream_dictionary(), 3)
    dictionaries = {DICTIONARY_ID_BASE + 1: prepared}
    return [
        Target("configure", compiled.configure, (Message, EMPTY_HEADERS, Record, Receipt, 7)),
        Target("crc32c", compiled.crc32c, (b"abc", 0)),
        Target("crc32c_table", compiled.crc32c_table, (b"abc", 0)),
        Target("crc32", compiled.crc32, (b"abc", 0)),
        Target("fnv1_32", compiled.fnv1_32, (b"abc",)),
        Target("encode_record", compiled.encode_record, (b"v", b"k", 1, {"h": b"x"}, 0, "t")),
        Target("encode_batch", compiled.encode_batch, ([b"v", b"w"], [b"k", b"j"], [1, 2], [None, {}], [None, "t"])),
        Target("encode_records", compiled.encode_records, ([Record(b"v", key="k"), b"w"], 5, 3, prepared)),
        Target("decode_at", compiled.decode_at, (record_bytes(), 0, [5, 9, 11], 2**20, {})),
        Target("decode_messages", compiled.decode_messages, (record_bytes(), 0, 10, 3, 2**20, dictionaries)),
        Target("tag_column", compiled.tag_column, (records,)),
        Target("matching_entries", compiled.matching_entries, (struct.pack("<III", 0, 5, 5), (5,))),
        Target(
            "matching_records",
            compiled.matching_records,
            (struct.pack("<III", 5, 0, 5), index_entries(), (5,), 10, 10, -1),
        ),
        Target("receipts", compiled.receipts, (0, 10, 3), frozenset({2})),
        Target("receipt", compiled.receipt, (0, 10)),
        Target("record_new", compiled.record_new, (Record, b"v", b"k", None, None, "t")),
        Target("install_record_call", compiled.install_record_call, (Plain,)),
        Target("sorted_key_values", compiled.sorted_key_values, (struct.pack("<4I", 9, 8, 7, 6), 20, 10, 1, True)),
        Target("place", compiled.place, ("key", 4)),
        Target("encode_push", compiled.encode_push, (b"v", "key", 1, {"h": b"x"}, "t", 4, 2**20)),
        Target("index_entries", compiled.index_entries, (0, 0, records, [1, 2])),
        Target("pack_records", compiled.pack_records, ([Record(b"v", key="k", tag="t"), b"w"], 5, 2**20)),
        Target("scan_columns", compiled.scan_columns, (record_bytes(), 0, 2**20)),
        Target("next_valid_record", compiled.next_valid_record, (record_bytes(), 1, 2**20)),
        Target("append_record", compiled.append_record, (os.write, data_fd, index_fd, records[0], 0, 0)),
        Target(
            "append_one",
            compiled.append_one,
            (os.write, data_fd, index_fd, records[0], 0, 0, 7, [], bytes(4), [], 9, []),
        ),
        Target("kafka_decode_batches", compiled.kafka_decode_batches, (kafka_batch(), 2**20, KafkaRecord, KafkaBatch)),
        Target("kafka_decode_records", compiled.kafka_decode_records, (*kafka_records(), 7, KafkaRecord)),
        Target(
            "kafka_stored_records",
            compiled.kafka_stored_records,
            (*kafka_records(), 7, 1_000_000_000, "adiskq.kafka.null"),
        ),
        Target("kafka_encode_records", compiled.kafka_encode_records, (KAFKA_RECORDS, 7)),
        Target("kafka_encode_batch", compiled.kafka_encode_batch, (5, KAFKA_RECORDS, 7, -1, -1, -1, 0)),
        Target("kafka_encode_messages", compiled.kafka_encode_messages, (kafka_messages(), None, 0)),
        Target(
            "kafka_batch_from_stored",
            compiled.kafka_batch_from_stored,
            (record_bytes(), 10, 3, 2**20, {DICTIONARY_ID_BASE + 1: prepared}, "adiskq.kafka.null", 0),
        ),
        Target(
            "kafka_fetch_answer",
            compiled.kafka_fetch_answer,
            (7, 16, [(b"0123456789abcdef", [(0, 0, 10, 0, [kafka_batch()]), (1, 3, -1, -1, [])])]),
        ),
        Target("kafka_fetch_request", compiled.kafka_fetch_request, (FETCH_REQUEST, 0, 12)),
        Target("kafka_produce_request", compiled.kafka_produce_request, (PRODUCE_REQUEST, 0, 9)),
        Target("place_entries", compiled.place_entries, (*run_of_records(), b"", 10, 100)),
        Target("zstd_prepare", compiled.zstd_prepare, (stream_dictionary(), 3)),
        Target("zstd_compress", compiled.zstd_compress, (prepared, b"value")),
        Target("Buffer", compiled.Buffer, (lambda: None,)),
        Target("Buffer.set", buffer.set, ([1, 2, 3], 1)),
        Target("Buffer.take", buffer.take, (1,)),
        Target("Buffer.clear", buffer.clear, ()),
        Target("Buffer.close", buffer.close, ()),
    ]


def exposed() -> set[str]:
    """The names of the compiled module's callables, and of Buffer's methods."""
    names = {name for name in dir(compiled) if not name.startswith("_") and callable(getattr(compiled, name))}
    names |= {f"Buffer.{name}" for name in dir(compiled.Buffer) if not name.startswith("_")} - {"Buffer.remaining"}
    return names


@pytest.fixture
def files(tmp_path: pathlib.Path) -> Iterator[tuple[int, int]]:
    """Two files append_record may write to."""
    data_fd = os.open(tmp_path / "data", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    index_fd = os.open(tmp_path / "index", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    yield data_fd, index_fd
    os.close(data_fd)
    os.close(index_fd)


@contextlib.contextmanager
def configured_again() -> Iterator[None]:
    """configure() and install_record_call() as core.py and values.py made them, whatever a hostile
    call changed meanwhile: ``configure(Record, ...)`` installs Message's free list on Record, and
    ``install_record_call`` of another type takes Record's, so a later test of Records in the same
    process would find none."""
    try:
        yield
    finally:
        compiled.configure(Message, EMPTY_HEADERS, Record, Receipt, random.getrandbits(64))
        compiled.install_record_call(Record)


def call_with(target: Target, arguments: tuple[object, ...]) -> None:
    """Call it: a return or a Python exception both pass; a crash or a sanitizer report does not."""
    with configured_again(), contextlib.suppress(Exception):
        result = target.call(*arguments)
        if isinstance(result, list):
            list(map(repr, result))  # what it made must be whole objects


def test_every_exposed_callable_is_walked(files: tuple[int, int]) -> None:
    """A function added to the compiled core without a place in this walk fails here."""
    assert {target.name for target in targets(files)} == exposed()


@pytest.mark.parametrize("name", sorted(exposed()))
def test_hostile_arguments_raise_python_exceptions(name: str, files: tuple[int, int]) -> None:
    """Each argument replaced by each hostile value, and too few and too many arguments: a Python
    exception or an answer, never memory corruption."""
    (target,) = [t for t in targets(files) if t.name == name]
    call_with(target, ())
    call_with(target, (*target.arguments, None, None))
    for position in range(len(target.arguments)):
        for value in hostile_values():
            if position in target.sizes and isinstance(value, int) and value > 2**20:
                continue
            arguments = list(target.arguments)
            arguments[position] = value
            call_with(target, tuple(arguments))
    gc.collect()


def test_take_refuses_a_negative_count_and_hands_out_nothing_twice() -> None:
    """Buffer.take(-n) (``aiter(consumer)`` is the Buffer) raises instead of moving its index back
    before the messages already handed out; both cores' buffers say the same."""
    from adiskq._async.buffered import MessageBuffer

    for buffer in (compiled.Buffer(lambda: None), MessageBuffer(lambda: None)):  # type: ignore[arg-type, return-value]
        buffer.set([b"m0", b"m1", b"m2"], 1)
        with pytest.raises(ValueError, match="0 or more"):
            buffer.take(-1000)
        assert buffer.remaining == 2
        assert buffer.take(2**80) == [b"m1", b"m2"]  # a count past the end takes what is left
        assert buffer.take(1) is None
        with pytest.raises(TypeError):
            buffer.take("1")


def test_configure_refuses_types_whose_instances_have_attributes() -> None:
    """The core fills Messages and Receipts itself: a tuple type with a __dict__ (whose pointer it
    would leave unset) is refused."""

    class WithDict(tuple):  # type: ignore[type-arg]
        pass

    with configured_again():
        for position in (0, 3):
            arguments: list[object] = [Message, EMPTY_HEADERS, Record, Receipt, 7]
            arguments[position] = WithDict
            with pytest.raises(TypeError, match="without instance attributes"):
                compiled.configure(*arguments)


def test_decode_at_reads_offsets_that_change_while_it_decodes() -> None:
    """An offset whose ``__index__`` empties the list being read is read from a copy, not past the
    list's end."""
    offsets: list[object] = []
    offsets += [Evil(offsets), 11, 12]
    messages = compiled.decode_at(record_bytes(), 0, offsets, 2**20)
    assert [m.offset for m in messages] == [-1, 11, 12]


def test_decode_and_receipts_number_past_2_63_as_the_reference() -> None:
    """Offsets that do not fit a signed 64-bit int are numbered as the reference numbers them,
    not wrapped."""
    first = 2**63 - 2
    expected = reference.decode_messages(record_bytes(), 0, first, 3)
    assert core.decode_messages(record_bytes(), 0, first, 3) == expected
    assert core.decode_messages(record_bytes(), 0, 2**64, 3) == reference.decode_messages(record_bytes(), 0, 2**64, 3)
    assert [r.offset for r in compiled.receipts(0, first, 3)] == [first, first + 1, first + 2]
    assert compiled.receipts(0, first, 3) == core.reference_receipts(0, first, 3)


def test_matching_records_does_not_wrap_on_a_damaged_size() -> None:
    """An .index entry whose size makes a span end past 2**64 is answered as the reference answers
    it, not merged with a span it does not touch."""
    column = struct.pack("<I", 1) * 2
    entries = struct.pack("<QQQ", 0, 100, 2**64 - 50) + struct.pack("<QQQ", 1, 50, 24)
    for max_bytes in (-1, 1000):
        arguments = (column, entries, (1,), 0, 100, max_bytes)
        assert core.matching_records(*arguments) == reference_tags.matching_records(*arguments)
    near_the_end = (column, struct.pack("<QQQ", 2**64 - 1, 0, 8) * 2, (1,), 2**64 - 1, 100, -1)
    assert core.matching_records(*near_the_end) == reference_tags.matching_records(*near_the_end)


def test_a_list_changed_by_a_collection_during_encoding_is_left_to_the_reference() -> None:
    """A batch whose list a finalizer shrinks while the core allocates is not read past its end."""

    class Shrinks:
        def __init__(self, victim: list[object]) -> None:
            self.victim = victim

        def __del__(self) -> None:
            self.victim.clear()

    for _ in range(50):
        items: list[object] = [Record(b"v", key="k")] * 200
        cycle: list[object] = []
        cycle.append([cycle, Shrinks(items)])
        del cycle
        with contextlib.suppress(Exception):
            compiled.encode_records(items, 5, 3)
        values: list[object] = [b"v"] * 200
        cycle = []
        cycle.append([cycle, Shrinks(values)])
        del cycle
        with contextlib.suppress(Exception):
            compiled.encode_batch(values, [b"k"] * 200, [1] * 200, None, None)
