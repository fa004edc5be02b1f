"""The compiled core's own answers on compressed values (the differential tests are in
test_compression_codec.py): it refuses a hostile frame itself, rather than relying on the reference."""

from __future__ import annotations

from typing import Any

import pytest
import zstandard
from support.compression import order_events, stream_dictionary
from support.memory import growth_over
from test_compression_codec import EVENT, FRAME, HOSTILE, LIMIT, MAGIC, compress_plain, record

from adiskq._sansio.compression import DICTIONARY_ID_BASE
from adiskq._sansio.native import NATIVE

# The compiled module itself (scripts/test runs this file only where it is built).
compiled: Any = NATIVE
EVENTS = order_events(1000)


def test_compiled_and_reference_compressors_store_the_same_layout() -> None:
    """The compiled core's frames are stored like the reference's: no magic number, the same header."""
    prepared = compiled.zstd_prepare(stream_dictionary(), 3)
    frame = compiled.zstd_compress(prepared, EVENT)
    assert frame[:5] == FRAME[:5]
    dictionary = zstandard.ZstdCompressionDict(stream_dictionary())
    assert zstandard.ZstdDecompressor(dict_data=dictionary).decompress(MAGIC + frame) == EVENT


def test_compiled_and_reference_plain_frames_are_the_same_bytes() -> None:
    """Plain zstd (a stream's values before its first dictionary): libzstd through the compiled core
    and the zstandard binding store the same frames, and the compiled decoder reads them with no
    dictionary at all."""
    plain = compiled.zstd_prepare(None, 3)
    values = [*EVENTS[:50], b"", b"x", bytes(5000), bytes(range(256)) * 3]
    frames = [compiled.zstd_compress(plain, value) for value in values]
    assert frames == [compress_plain(value) for value in values]
    messages = compiled.decode_messages(b"".join(map(record, frames)), 0, 0, len(frames), LIMIT, {})
    assert [message.value for message in messages] == values


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_compiled_decoder_never_returns_a_hostile_value(name: str) -> None:
    """The compiled decoder itself answers (position, False) for a hostile frame: it never hands out a value."""
    prepared = compiled.zstd_prepare(stream_dictionary(), 3)
    buf = record(HOSTILE[name])
    assert compiled.decode_messages(buf, 0, 0, 1, LIMIT, {DICTIONARY_ID_BASE + 1: prepared}) == (0, False)


def compression_round() -> None:
    """Prepared dictionaries made and dropped, values compressed, records decoded, hostile frames refused."""
    prepared = compiled.zstd_prepare(stream_dictionary(), 3)
    dictionaries = {DICTIONARY_ID_BASE + 1: prepared}
    plain = compiled.zstd_prepare(None, 3)
    frames = [compiled.zstd_compress(prepared, event) for event in EVENTS]
    frames += [compiled.zstd_compress(plain, event) for event in EVENTS[:200]]
    buffer = b"".join(map(record, frames))
    for _ in range(20):
        messages = compiled.decode_messages(buffer, 0, 0, len(frames), LIMIT, dictionaries)
        assert len(messages) == len(frames)
    hostile = record(HOSTILE["content size says one more"])
    for _ in range(2000):
        assert compiled.decode_messages(hostile, 0, 0, 1, LIMIT, dictionaries) == (0, False)


def test_compression_leaves_memory_flat() -> None:
    """Dictionaries prepared and freed, and 200,000 values compressed and decompressed, leak nothing."""
    grown = growth_over(compression_round, rounds=10)
    # A leaked value per record would be 50 MiB or more, a leaked dictionary 1 MiB each round.
    assert grown < 4 * 2**20, f"memory grew by {grown / 2**20:.1f} MiB"
