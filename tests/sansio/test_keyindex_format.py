"""The key index format, bytes in and out (``adiskq._sansio.keyindex``): a table of examples, then
properties every column must have."""

from __future__ import annotations

import array
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adiskq._sansio import keyindex
from adiskq._sansio.codec import encode_record

# (hashes, their hash column): one little-endian u32 per message, nothing else.
COLUMNS = [
    ([], b""),
    ([0], b"\x00\x00\x00\x00"),
    ([1, 0xFFFF_FFFF], b"\x01\x00\x00\x00\xff\xff\xff\xff"),
    ([0x0A0B0C0D], b"\x0d\x0c\x0b\x0a"),
]


@pytest.mark.parametrize(("hashes", "column"), COLUMNS)
def test_a_hash_column_is_one_little_endian_u32_per_message(hashes: list[int], column: bytes) -> None:
    """pack_hashes writes the table's bytes, unpack_hashes reads them back."""
    assert keyindex.pack_hashes(hashes) == column
    assert keyindex.pack_hashes(array.array("I", hashes)) == column  # as the compiled encoder hands them over
    assert keyindex.pack_hashes(iter(hashes)) == column
    assert keyindex.unpack_hashes(column).tolist() == hashes


def test_the_key_hash_is_zlibs_crc32() -> None:
    """The hash of a key is the CRC-32 (ISO-HDLC) of its bytes."""
    assert keyindex.key_hash(b"order-12345") == zlib.crc32(b"order-12345")


@given(st.lists(st.integers(0, 2**32 - 1), max_size=300))
def test_a_column_round_trips_and_a_partial_entry_is_left_out(hashes: list[int]) -> None:
    """Whole entries read back as written; a trailing partial entry is not an entry."""
    column = keyindex.pack_hashes(hashes)
    assert len(column) == keyindex.ENTRY_BYTES * len(hashes)
    assert keyindex.unpack_hashes(column + b"\x01\x02").tolist() == hashes


@given(st.lists(st.integers(0, 2**32 - 1), max_size=600))
def test_a_sealed_tail_describes_its_column_and_nothing_else(hashes: list[int]) -> None:
    """The trailer of a sealed column agrees with its entry count and size, and disagrees with others."""
    column = keyindex.pack_hashes(hashes)
    tail = keyindex.sealed_tail(column)
    trailer = keyindex.TRAILER.unpack(tail[-keyindex.TRAILER_BYTES :])
    size = len(column) + len(tail)
    assert trailer[0] == keyindex.MAGIC
    assert trailer[1] == len(hashes)
    assert keyindex.trailer_problem(trailer, size, len(hashes)) is None
    assert keyindex.trailer_problem(trailer, size, len(hashes) + 1) is not None
    assert keyindex.trailer_problem(trailer, size + 4, len(hashes)) is not None


@given(st.lists(st.binary(max_size=12), min_size=1, max_size=40), st.data())
def test_key_hashes_cut_from_records_and_from_data_agree(keys: list[bytes], data: st.DataObject) -> None:
    """Hashes cut from whole records equal those cut from a .data buffer, and the key search finds
    exactly the records with that key."""
    records = [encode_record(b"v%d" % i, key, i) for i, key in enumerate(keys)]
    positions, position = [], 0
    for record in records:
        positions.append(position)
        position += len(record)
    buffer = b"".join(records)
    expected = [zlib.crc32(key) for key in keys]
    assert keyindex.record_key_hashes(records) == expected
    assert keyindex.data_key_hashes(buffer, positions) == expected
    wanted = data.draw(st.sampled_from(keys))
    assert keyindex.data_key_matches(buffer, positions, wanted) == [i for i, key in enumerate(keys) if key == wanted]
