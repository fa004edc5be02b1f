"""The key index file format: the hash column, the seal, its checks, and the searches around it."""

from __future__ import annotations

import os
import random
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adiskq._sansio import keyindex as keyindex_format
from adiskq._sansio.codec import encode_record
from adiskq._storage import keyindex


def brute_force(hashes: list[int], wanted: int) -> list[int]:
    """Entry numbers holding ``wanted``, the slow and obvious way."""
    return [number for number, value in enumerate(hashes) if value == wanted]


def sealed(tmp_path: object, hashes: list[int]) -> str:
    """A sealed key index of these hashes, written as the producer's open rebuilds one."""
    path = os.path.join(str(tmp_path), "00000000000000000000.keyindex")
    keyindex.write_sealed_file(path, keyindex_format.pack_hashes(hashes))
    return path


def candidates(path: str, count: int, wanted: int) -> list[int]:
    index = keyindex.sealed_index(os.path.dirname(path), 0, count)
    assert index is not None
    return index.candidates(wanted)


def test_pack_and_unpack_hashes_round_trip() -> None:
    """A hash column holds each hash as a little-endian u32, in order."""
    hashes = [0, 1, 0xFFFF_FFFF, 0x1234_5678]
    raw = keyindex_format.pack_hashes(hashes)
    assert raw[12:] == bytes.fromhex("78563412")
    assert keyindex_format.unpack_hashes(raw).tolist() == hashes


def test_the_key_hash_is_crc32_of_the_key_bytes() -> None:
    """The documented hash: zlib's CRC-32 of the key's bytes."""
    assert keyindex_format.key_hash(b"order-12345") == zlib.crc32(b"order-12345")


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=40), min_size=1, max_size=300),
    st.integers(min_value=0, max_value=40),
    st.integers(min_value=0, max_value=5),
)
def test_a_sealed_index_finds_exactly_the_entries_of_a_hash(
    tmp_path_factory: pytest.TempPathFactory, small: list[int], wanted: int, spread: int
) -> None:
    """For any column (many duplicates, hashes sharing their top bits), candidates == brute force."""
    # Hashes that differ only in low bits share a sorted-column bucket; high ones spread out.
    hashes = [(value << (spread * 5)) & 0xFFFF_FFFF for value in small]
    target = (wanted << (spread * 5)) & 0xFFFF_FFFF
    path = sealed(tmp_path_factory.mktemp("sealed"), hashes)
    assert candidates(path, len(hashes), target) == brute_force(hashes, target)


@pytest.mark.parametrize("count", [1, 4095, 4096, 4097, 3 * 4096 + 5])
def test_a_sealed_index_finds_entries_in_every_block(tmp_path: object, count: int) -> None:
    """Block boundaries lose nothing: every entry of a column is found by its hash."""
    rng = random.Random(count)
    keys = [rng.randrange(count // 3 + 1) for _ in range(count)]
    hashes = [zlib.crc32(b"key-%d" % key) for key in keys]
    path = sealed(tmp_path, hashes)
    for value in set(hashes[:: max(1, count // 50)]) | {hashes[-1], 12345}:
        assert candidates(path, count, value) == brute_force(hashes, value)


@pytest.mark.parametrize(("keys", "block_shift"), [(10, 12), (20_000, 9)])
def test_blocks_are_small_where_keys_are_mostly_distinct(tmp_path: object, keys: int, block_shift: int) -> None:
    """Few keys: blocks of 4,096 (one value per key and block). Mostly distinct keys: blocks of 512."""
    rng = random.Random(keys)
    hashes = [zlib.crc32(b"key-%d" % rng.randrange(keys)) for _ in range(20_000)]
    path = sealed(tmp_path, hashes)
    with open(path, "rb") as file:
        file.seek(-keyindex_format.TRAILER_BYTES, os.SEEK_END)
        assert keyindex_format.TRAILER.unpack(file.read())[3] == block_shift
    for value in hashes[::997]:
        assert candidates(path, len(hashes), value) == brute_force(hashes, value)


def test_a_hot_key_among_distinct_ones_is_found_once_per_message(tmp_path: object) -> None:
    """Small blocks keep one value per message: a key repeated in a block still yields each entry once."""
    hashes = [zlib.crc32(b"unique-%d" % i) for i in range(10_000)]
    hot = zlib.crc32(b"hot")
    for position in (3, 4, 5, 100, 511, 512, 9_999):
        hashes[position] = hot
    path = sealed(tmp_path, hashes)
    assert candidates(path, len(hashes), hot) == [3, 4, 5, 100, 511, 512, 9_999]


def test_huge_segments_use_bigger_blocks(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past 4,096 blocks the blocks grow, so the sorted values keep enough bits of the hash."""
    monkeypatch.setattr(keyindex_format, "_MAX_BLOCK_BITS", 2)  # at most four blocks
    monkeypatch.setattr(keyindex_format, "_LARGE_BLOCK_SHIFT", 3)  # of at least eight entries
    monkeypatch.setattr(keyindex_format, "_SMALL_BLOCK_SHIFT", 1)
    rng = random.Random(7)
    hashes = [rng.getrandbits(32) for _ in range(100)]
    path = sealed(tmp_path, hashes)
    with open(path, "rb") as file:
        file.seek(-keyindex_format.TRAILER_BYTES, os.SEEK_END)
        _, count, _, block_shift, hash_bits, _, _ = keyindex_format.TRAILER.unpack(file.read())
    assert (count, block_shift, hash_bits) == (100, 5, 28)
    for value in hashes[::7]:
        assert candidates(path, 100, value) == brute_force(hashes, value)


def test_a_sealed_file_is_the_column_then_sorted_values_then_the_trailer(tmp_path: object) -> None:
    """The layout README documents: n hashes, d sorted values, a 32-byte trailer with a CRC-32C."""
    hashes = [5, 5, 0xFFFF_FFFF]
    path = sealed(tmp_path, hashes)
    with open(path, "rb") as file:
        raw = file.read()
    magic, count, distinct, block_shift, hash_bits, reserved, checksum = keyindex_format.TRAILER.unpack(raw[-32:])
    assert (magic, count, distinct, block_shift, hash_bits, reserved) == (b"AKX1", 3, 2, 12, 30, 0)
    assert raw[:12] == keyindex_format.pack_hashes(hashes)
    assert keyindex_format.unpack_hashes(raw[12:20]).tolist() == [5 >> 2, 0xFFFF_FFFF >> 2]
    from crc32c import crc32c

    assert checksum == crc32c(raw[: len(raw) - 32 + 16])
    assert len(raw) == (count + distinct) * 4 + 32


def test_an_empty_column_seals(tmp_path: object) -> None:
    """A segment of no messages has a valid (empty) sealed key index."""
    path = sealed(tmp_path, [])
    assert keyindex.sealed_problem(path, 0, check_crc=True) is None


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        ("missing", "missing"),
        ("unsealed", "not sealed"),
        ("truncated", "not sealed"),
        ("grown", "bytes, its trailer says"),
        ("bit flip", "CRC-32C"),
    ],
)
def test_a_damaged_sealed_index_is_named(tmp_path: object, damage: str, problem: str) -> None:
    """Each kind of damage is found and said; the CRC only when asked."""
    hashes = [zlib.crc32(b"k%d" % i) for i in range(500)]
    path = sealed(tmp_path, hashes)
    with open(path, "rb") as file:
        raw = bytearray(file.read())
    if damage == "missing":
        os.unlink(path)
    else:
        if damage == "unsealed":
            raw = raw[: 500 * 4]
        elif damage == "truncated":
            raw = raw[:-1]
        elif damage == "grown":
            raw[-32:-32] = b"\0\0\0\0"
        else:
            raw[100] ^= 0x10
        with open(path, "wb") as file:
            file.write(raw)
    found = keyindex.sealed_problem(path, 500, check_crc=True)
    assert found is not None
    assert problem in found
    if damage == "bit flip":
        assert keyindex.sealed_problem(path, 500, check_crc=False) is None
        assert keyindex.sealed_index(os.path.dirname(path), 0, 500) is None


def test_a_sealed_index_for_another_message_count_is_refused(tmp_path: object) -> None:
    """An index whose trailer counts other messages than the segment's .index is not used."""
    path = sealed(tmp_path, [1, 2, 3])
    assert keyindex.sealed_problem(path, 4, check_crc=False) == "it covers 3 messages, the segment has 4"
    assert keyindex.sealed_index(os.path.dirname(path), 0, 4) is None


def test_an_unusable_index_is_warned_about_once(tmp_path: object, caplog: pytest.LogCaptureFixture) -> None:
    """Readers log one warning per damaged file, naming it and what happens instead."""
    path = sealed(tmp_path, [1, 2, 3])
    with open(path, "r+b") as file:
        file.write(b"\xff")
    for _ in range(3):
        assert keyindex.sealed_index(os.path.dirname(path), 0, 3) is None
    warnings = [r for r in caplog.records if "is not used" in r.getMessage()]
    assert len(warnings) == 1
    assert path in warnings[0].getMessage()
    assert "search that segment's data" in warnings[0].getMessage()
    assert "Delete the file" in warnings[0].getMessage()


def test_column_candidates_cover_only_the_committed_entries(tmp_path: object) -> None:
    """An active column is searched up to the message count; entries past it are ignored."""
    path = os.path.join(str(tmp_path), "00000000000000000000.keyindex")
    with open(path, "wb") as file:
        file.write(keyindex_format.pack_hashes([7, 8, 7, 7]) + b"\x07\x00")  # and half an entry
    assert keyindex.column_candidates(path, 3, 7) == ([0, 2], 3)
    assert keyindex.column_candidates(path, 10, 7) == ([0, 2, 3], 4)
    assert keyindex.column_candidates(path + ".gone", 3, 7) == ([], 0)


def test_column_candidates_skip_unaligned_matches(tmp_path: object) -> None:
    """A hash's bytes straddling two entries is not a match."""
    path = os.path.join(str(tmp_path), "00000000000000000000.keyindex")
    with open(path, "wb") as file:
        file.write(bytes.fromhex("00 00 AA BB  CC DD 00 00  AA BB CC DD"))
    assert keyindex.column_candidates(path, 3, 0xDDCCBBAA) == ([2], 3)


RECORDS = [
    encode_record(b"value", b"key-1", 1),
    encode_record(b"", b"", 2),
    encode_record(b"v" * 300, b"a-longer-key", 3, {"h": b"x"}),
    encode_record(b"key-1", b"key-2", 4),
]


def test_key_hashes_are_cut_from_records_of_mixed_key_lengths() -> None:
    """Records with keys of different lengths (and headers) give each key's hash."""
    keys = [b"key-1", b"", b"a-longer-key", b"key-2"]
    assert keyindex_format.record_key_hashes(RECORDS) == [zlib.crc32(k) for k in keys]


def test_key_hashes_are_cut_from_records_of_one_key_length() -> None:
    """The one-length fast path gives the same hashes."""
    records = [encode_record(b"x" * i, b"key-%d" % (i % 10), i) for i in range(50)]
    assert keyindex_format.record_key_hashes(records) == [zlib.crc32(b"key-%d" % (i % 10)) for i in range(50)]
    assert keyindex_format.record_key_hashes([]) == []


def test_key_hashes_are_cut_from_a_data_buffer() -> None:
    """Recovery's form: records found by their positions in the data."""
    data = b"".join(RECORDS)
    positions = [0, len(RECORDS[0]), len(RECORDS[0]) + len(RECORDS[1]), len(data) - len(RECORDS[3])]
    assert keyindex_format.data_key_hashes(data, positions) == keyindex_format.record_key_hashes(RECORDS)


def test_the_data_search_finds_keys_not_values() -> None:
    """A key's bytes inside a value (or another key) is no match; the empty key is found too."""
    prefix = b"garbage"
    data = prefix + b"".join(RECORDS)
    positions, position = [], len(prefix)
    for record in RECORDS:
        positions.append(position)
        position += len(record)
    assert keyindex_format.data_key_matches(data, positions, b"key-1") == [0]
    assert keyindex_format.data_key_matches(data, positions, b"") == [1]
    assert keyindex_format.data_key_matches(data, positions, b"key") == []
    shifted = [p + 1000 for p in positions]
    assert keyindex_format.data_key_matches(data, shifted, b"key-2", origin=1000) == [3]
