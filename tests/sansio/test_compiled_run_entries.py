"""The compiled ``place_entries`` against its pure-Python reference: same placed entries, or the same error.

An ``EncodedRun`` (a Produce's batch, push_many's packed batch) comes with index entries numbered
from 0; the segment places them at its next offset and the end of ``.data`` (offsets and positions
made by ``place_entries`` itself, whatever the run's own say), so every entry that disagrees with
the run's bytes in what the files take from it (a size that is not the record's, records that do
not fill the data, a tag entry that says otherwise than its record, a count that differs between
the columns, a placement past 2**63 - 1) must be refused before anything is written, alike in both.
"""

from __future__ import annotations

import re
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adiskq._sansio import core, run_entries
from adiskq._sansio.codec import encode_record
from adiskq._sansio.native import NATIVE
from adiskq._sansio.run_entries import place_entries_reference, run_records, run_timestamps
from adiskq._sansio.values import Record
from adiskq.kafka.wire.codec import KafkaRecord, encode_records
from adiskq.kafka.wire.mapping import stored_records_reference

assert NATIVE is not None
NOW = 1_800_000_000_123_456_789
U63 = st.integers(min_value=0, max_value=2**63 - 1)
records = st.builds(
    KafkaRecord,
    st.just(0),
    st.integers(min_value=-1, max_value=2_000_000_000_000),
    st.one_of(st.none(), st.binary(max_size=12)),
    st.one_of(st.none(), st.binary(max_size=40)),
    st.lists(st.tuples(st.sampled_from(["a", "b", "é"]), st.binary(max_size=4)), max_size=2, unique_by=lambda h: h[0]),
)


def run_of(batch: list[KafkaRecord]) -> tuple[bytes, bytes, bytes]:
    """The run a Produce makes of ``batch``: its bytes, .index and .timeindex entries from 0."""
    numbered = [record._replace(offset_delta=i) for i, record in enumerate(batch)]
    section, _, _ = encode_records(numbered, 0)
    stored = stored_records_reference(section, 0, len(section), len(batch), 0, NOW)
    assert stored is not None
    return stored.data, stored.index_entries, stored.time_entries


def compare(
    data: object, index: object, timeindex: object, first_offset: object, start: object, tagindex: object = b""
) -> object:
    """Both functions: the same entries, or the same exception type and message; the reference's answer."""
    arguments = (data, index, timeindex, tagindex, first_offset, start)
    try:
        want: object = place_entries_reference(*arguments)  # type: ignore[arg-type]
    except Exception as error:
        with pytest.raises(type(error), match=f"^{re.escape(str(error))}$"):
            NATIVE.place_entries(*arguments)
        return error
    assert NATIVE.place_entries(*arguments) == want
    return want


def test_the_compiled_function_is_in_use() -> None:
    """A built core places a run's entries with the compiled function."""
    assert run_entries.place_entries is not place_entries_reference


@settings(max_examples=200, deadline=None)
@given(st.lists(records, min_size=0, max_size=6), U63, U63)
def test_entries_are_placed_at_the_offset_and_position_given(batch: list[KafkaRecord], first: int, start: int) -> None:
    """Each offset moved by first_offset, each position by start, sizes and timestamps kept (or the
    same refusal where the placement passes 2**63 - 1)."""
    data, index, timeindex = run_of(batch)
    placed = compare(data, index, timeindex, first, start)
    if isinstance(placed, tuple):
        entries = list(struct.iter_unpack("<QQQ", placed[0]))
        sizes = [len(record) for record in run_records(data, index)]
        positions = [start + sum(sizes[:i]) for i in range(len(sizes))]
        assert entries == [(first + i, positions[i], sizes[i]) for i in range(len(sizes))]
        assert [stamp for _, stamp in struct.iter_unpack("<Qq", placed[1])] == run_timestamps(timeindex)


@st.composite
def damaged_runs(draw: st.DrawFn) -> tuple[bytes, bytes, bytes]:
    """A valid run with a byte of its entries or data changed, or a column cut or lengthened."""
    data, index, timeindex = run_of(draw(st.lists(records, min_size=1, max_size=4)))
    columns = [bytearray(data), bytearray(index), bytearray(timeindex)]
    column = columns[draw(st.integers(min_value=0, max_value=2))]
    choice = draw(st.integers(min_value=0, max_value=2))
    at = draw(st.integers(min_value=0, max_value=len(column) - 1))
    if choice == 0:
        column[at] ^= draw(st.integers(min_value=1, max_value=255))
    elif choice == 1:
        del column[at:]
    else:
        column[at:at] = draw(st.binary(min_size=1, max_size=24))
    return bytes(columns[0]), bytes(columns[1]), bytes(columns[2])


@settings(max_examples=400, deadline=None)
@given(damaged_runs(), U63)
def test_entries_that_disagree_with_the_run_are_refused_alike(damaged: tuple[bytes, bytes, bytes], first: int) -> None:
    """Moved, resized, renumbered or missing entries, damaged size fields and attributes: the same
    error in both, or the same entries where what the files take from the run is still right."""
    compare(*damaged, first, 0)


def test_a_tagged_record_needs_the_tag_column() -> None:
    """A run without a tag column gets a "no tag" .tagindex entry a record: a tagged record in it is
    refused; with its tag column (push_many's packed batch), it is placed."""
    record = encode_record(b"v", b"k", 5, None, tag="t")
    index = struct.pack("<QQQ", 0, 0, len(record))
    timeindex = struct.pack("<Qq", 0, 5)
    error = compare(record, index, timeindex, 0, 0)
    assert isinstance(error, ValueError)
    assert "no tag" in str(error)
    placed = compare(record, index, timeindex, 7, 9, core.tag_column([record]))
    assert isinstance(placed, tuple)
    assert struct.unpack("<QQQ", placed[0]) == (7, 9, len(record))


tagged_records = st.builds(
    Record,
    st.binary(max_size=20),
    st.binary(max_size=6),
    st.none(),
    st.integers(min_value=0, max_value=2**62),
    st.one_of(st.none(), st.sampled_from(["red", "green", "é"])),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(tagged_records, max_size=6), U63, U63, st.data())
def test_a_packed_batch_with_its_tag_column_is_placed_alike(
    batch: list[Record], first: int, start: int, data: st.DataObject
) -> None:
    """push_many's packed batch (tags among its records): placed as ``index_entries`` places the same
    records; a tag entry changed so that it says "no tag" of a tagged record (or the reverse), or a
    column of another length, is refused alike."""
    packed = core.reference_pack_records(list(batch), 0, 2**40)
    assert packed is not None
    placed = compare(packed.data, packed.index_entries, packed.time_entries, first, start, packed.tag_entries)
    if isinstance(placed, tuple) and first < 2**40 and start < 2**40:
        records = run_records(packed.data, packed.index_entries)
        index, timeindex, _ = core.reference_index_entries(first, start, records, run_timestamps(packed.time_entries))
        assert placed == (index, timeindex)
    if batch:
        tags = bytearray(packed.tag_entries or bytes(4 * len(batch)))  # b"": no record carries a tag
        at = data.draw(st.integers(min_value=0, max_value=len(tags) - 1))
        tags[at] ^= data.draw(st.integers(min_value=1, max_value=255))
        compare(packed.data, packed.index_entries, packed.time_entries, first, start, bytes(tags))
        compare(packed.data, packed.index_entries, packed.time_entries, first, start, packed.tag_entries[:-1])


@given(st.binary(max_size=60), st.binary(max_size=60), st.binary(max_size=40), U63, U63)
def test_noise_is_refused_as_in_the_reference(
    data: bytes, index: bytes, timeindex: bytes, first: int, start: int
) -> None:
    """Random columns: the same error (or the same entries) in both, never a read past the bytes."""
    compare(data, index, timeindex, first, start)


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ((b"", b"", b"", b"", 0), TypeError),
        ((bytearray(), b"", b"", b"", 0, 0), TypeError),
        ((b"", memoryview(b""), b"", b"", 0, 0), TypeError),
        ((b"", b"", "", b"", 0, 0), TypeError),
        ((b"", b"", b"", None, 0, 0), TypeError),
        ((b"", b"", b"", b"", 0.0, 0), TypeError),
        ((b"", b"", b"", b"", 0, None), TypeError),
        ((b"", b"", b"", b"", -1, 0), ValueError),
        ((b"", b"", b"", b"", 0, -1), ValueError),
        ((b"", b"", b"", b"", 2**63, 0), OverflowError),
        ((b"", b"", b"", b"", 0, -(2**64)), OverflowError),
        ((b"", b"", b"", b"\0\0\0\0", 0, 0), ValueError),
        ((b"", b"", b"", b"", 2**63 - 1, 2**63 - 1), None),
    ],
)
def test_every_argument_is_checked(arguments: tuple[object, ...], error: type[Exception] | None) -> None:
    """Wrong counts, types and ranges of arguments raise the same error in both; an empty run is placed anywhere."""
    if len(arguments) == 6:
        data, index, timeindex, tagindex, first_offset, start = arguments
        answer = compare(data, index, timeindex, first_offset, start, tagindex)
        assert answer == (b"", b"") if error is None else isinstance(answer, error)
        return
    with pytest.raises(error or TypeError):
        NATIVE.place_entries(*arguments)


def test_a_placement_past_the_last_offset_or_position_is_refused() -> None:
    """The last record's offset or the end of the data past 2**63 - 1: refused, nothing placed."""
    data, index, timeindex = run_of([KafkaRecord(0, 1, b"k", b"v", [])] * 3)
    assert isinstance(compare(data, index, timeindex, 2**63 - 2, 0), ValueError)
    assert isinstance(compare(data, index, timeindex, 2**63 - 3, 0), tuple)
    assert isinstance(compare(data, index, timeindex, 0, 2**63 - len(data)), ValueError)
    assert isinstance(compare(data, index, timeindex, 0, 2**63 - 1 - len(data)), tuple)


@settings(max_examples=100, deadline=None)
@given(st.lists(records, min_size=1, max_size=6), U63, st.data())
def test_a_run_s_own_offsets_and_positions_are_replaced(
    batch: list[KafkaRecord], first: int, data: st.DataObject
) -> None:
    """Offsets and positions are made by the placement, not taken from the run: a run numbered
    otherwise is placed exactly as the same run numbered 0, 1, 2 ..., alike in both."""
    run, index, timeindex = run_of(batch)
    want = compare(run, index, timeindex, first, 0)
    entries = bytearray(index)
    times = bytearray(timeindex)
    for i in range(len(batch)):
        struct.pack_into("<QQ", entries, 24 * i, *data.draw(st.tuples(U63, U63)))
        struct.pack_into("<Q", times, 16 * i, data.draw(U63))
    assert repr(compare(run, bytes(entries), bytes(times), first, 0)) == repr(want)  # entries, or the same error
