"""A packed batch (``pack_records``: one ``.data`` buffer and its entries) appended as ``append``
appends the same records: the same bytes in every file of the segment, and the same outcome when the
disk fails part-way (nothing kept, or the entries a reader could have seen kept, the rest cut back).

The batches are packed by the reference (``core.reference_pack_records``, which the compiled
``pack_records`` is held equal to in tests/sansio), so this runs under either core.
"""

from __future__ import annotations

import errno
import os
import pathlib
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.faults import DiskFaults

from adiskq._sansio import codec as reference
from adiskq._sansio import core
from adiskq._sansio.entries import EncodedRun
from adiskq._sansio.tags import tag_entry
from adiskq._sansio.values import Record
from adiskq._storage.segment_writer import PartlyCommittedError, SegmentWriter

SUFFIXES = (".data", ".index", ".timeindex", ".keyindex", ".tagindex")

records = st.lists(
    st.builds(
        Record,
        st.binary(max_size=80),
        key=st.one_of(st.binary(min_size=1, max_size=12), st.text(min_size=1, max_size=6)),
        headers=st.none(),
        timestamp=st.one_of(st.none(), st.integers(0, 2**62)),
        tag=st.one_of(st.none(), st.text(min_size=1, max_size=5)),
    ),
    min_size=1,
    max_size=12,
)


def single_pushes(writer: SegmentWriter, count: int) -> None:
    """Single pushes before the batch: their time, tag and key entries wait in the writer's buffers."""
    for i in range(count):
        key = b"single-%d" % i
        writer.append_one(reference.encode_record(b"v%d" % i, key, i), i, zlib.crc32(key), tag_entry(None))


def batch_columns(batch: list[Record], now: int) -> tuple[list[bytes], list[int], list[int], bytes]:
    """``append``'s arguments for the same batch: each record encoded alone, its timestamp, key hash and tag entry."""
    raw = [k.encode() if isinstance(k, str) else k for _, k, _, _, _ in batch]
    stamps = [now if t is None else t for _, _, _, t, _ in batch]
    encoded = [
        reference.encode_record(r.value, key, stamp, None, 0, r.tag)
        for r, key, stamp in zip(batch, raw, stamps, strict=True)
    ]
    return encoded, stamps, list(map(zlib.crc32, raw)), b"".join(tag_entry(r.tag) for r in batch)


def segment_files(directory: pathlib.Path) -> dict[str, bytes]:
    return {suffix: (directory / f"{0:020d}{suffix}").read_bytes() for suffix in SUFFIXES}


def packed(batch: list[Record], now: int) -> EncodedRun:
    made = core.reference_pack_records(batch, now, 2**40)
    assert made is not None
    return made


@settings(max_examples=60, deadline=None)
@given(batch=records, singles=st.integers(0, 3), now=st.integers(0, 2**62))
def test_a_packed_batch_leaves_the_bytes_append_leaves(
    tmp_path_factory: pytest.TempPathFactory, batch: list[Record], singles: int, now: int
) -> None:
    """Every file of the segment holds what ``append`` of the batch's records writes, single pushes'
    buffered entries first, and the writer goes on from the same offset and position."""
    seen = []
    for way in ("records", "packed"):
        directory = tmp_path_factory.mktemp(way)
        writer = SegmentWriter.create(os.fspath(directory), 0)
        single_pushes(writer, singles)
        if way == "records":
            encoded, stamps, hashes, tags = batch_columns(batch, now)
            first = writer.append(encoded, stamps, hashes, tags)
        else:
            first = writer.append_run(packed(batch, now))
        single_pushes(writer, 1)  # and what comes after lands where it would
        writer.close()
        seen.append((first, writer.next_offset, writer.data_size, segment_files(directory)))
    assert seen[0] == seen[1]


@pytest.mark.parametrize("suffix", SUFFIXES)
@pytest.mark.parametrize("short", [False, True], ids=["failed", "cut short then failed"])
def test_a_failed_packed_batch_ends_as_a_failed_append(
    tmp_path_factory: pytest.TempPathFactory, faults: DiskFaults, suffix: str, short: bool
) -> None:
    """A disk error in any file's write: the same error, the same entries kept (those a reader could
    have seen) or none, the same files, and the writer goes on as after the failed ``append``."""
    batch = [Record(b"value %d" % i, key=b"k%d" % i, tag="t" if i % 2 else None) for i in range(10)]
    seen = []
    for way in ("records", "packed"):
        directory = tmp_path_factory.mktemp(way)
        writer = SegmentWriter.create(os.fspath(directory), 0)
        single_pushes(writer, 2)
        faults.failing[suffix] = errno.ENOSPC
        faults.short_write_then_fail = short
        try:
            if way == "records":
                writer.append(*batch_columns(batch, 7))
            else:
                writer.append_run(packed(batch, 7))
        except PartlyCommittedError as error:
            outcome: object = ("partly", error.errno, error.first_offset, error.committed)
        except OSError as error:
            outcome = ("failed", error.errno)
        else:
            outcome = "written"
        faults.failing.clear()
        after = writer.append_run(packed([Record(b"after", key=b"a")], 8))
        writer.close()
        seen.append((outcome, after, writer.next_offset, writer.data_size, segment_files(directory)))
    assert seen[0] == seen[1]
    assert seen[0][0] != "written"


def test_a_packed_batch_with_columns_of_other_lengths_is_refused(tmp_path: pathlib.Path) -> None:
    """Columns that do not hold one entry a record are refused before anything is written."""
    writer = SegmentWriter.create(os.fspath(tmp_path), 0)
    batch = packed([Record(b"v", key=b"k", tag="t"), Record(b"w", key=b"j")], 7)
    with pytest.raises(ValueError, match="one entry a record"):
        writer.append_run(batch._replace(tag_entries=batch.tag_entries[:4]))
    assert writer.append_run(batch) == 0
    writer.close()
    assert writer.next_offset == 2
