"""Compressed values: the compiled core's decoder against the reference's, on sound and hostile zstd frames.

Both decode the same records with the same stream dictionaries and must answer alike: the same
values, or the same error at the same position. A frame that is cut short, states a content size it
does not hold or one above the record limit, names a dictionary the stream lacks, or carries bytes
after it, is a damaged record for both, never a value.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from support.compression import order_events, stream_dictionary, trained_dictionary

import adiskq
from adiskq._sansio import codec as reference
from adiskq._sansio import core
from adiskq._sansio.compression import (
    COMPRESSED,
    DICTIONARY_ID_BASE,
    Dictionaries,
    ReferenceDictionary,
    ReferencePlain,
    encode_dictionary_file,
    frame_dictionary_id,
    parse_dictionary_file,
)
from adiskq._sansio.native import NATIVE

LIMIT = 1 << 20


def dictionaries(*versions: int) -> Dictionaries:
    """A stream's dictionaries holding ``versions`` (1 and 2 are trained from different events); any
    other version's file is missing."""

    def load(version: int) -> bytes:
        if version not in versions:
            raise adiskq.CorruptStreamError(f"dictionary version {version} is missing")
        return stream_dictionary(version, seed=version)

    return Dictionaries(load)


def compress(value: bytes, version: int = 1) -> bytes:
    return ReferenceDictionary(version, stream_dictionary(version, seed=version), 3).compress(value)


def compress_plain(value: bytes) -> bytes:
    """``value`` in a plain zstd frame (no dictionary), as a stream's first values are stored."""
    return ReferencePlain(3).compress(value)


def record(frame: bytes) -> bytes:
    return reference.encode_record(frame, b"key", 5, None, COMPRESSED)


def outcome(call: Callable[[], object]) -> object:
    """What a call returned, or its error as (type, message, position)."""
    try:
        return call()
    except Exception as error:
        return (type(error).__name__, str(error), getattr(error, "position", None))


def both(buf: bytes, *, limit: int = LIMIT, versions: tuple[int, ...] = (1,)) -> tuple[object, object]:
    """The compiled core's and the reference's decoding of ``buf``, each with its own dictionaries."""
    count = len(list(reference.scan_records(buf)))
    compiled = outcome(
        lambda: core.decode_messages(buf, 0, 0, count, max_record_bytes=limit, dictionaries=dictionaries(*versions))
    )
    pure = outcome(
        lambda: reference.decode_messages(
            buf, 0, 0, count, max_record_bytes=limit, dictionaries=dictionaries(*versions)
        )
    )
    return compiled, pure


EVENT = order_events(3000)[2500]
FRAME = compress(EVENT)
# The stored frame's header: descriptor (1: single segment, 2-byte dictionary id, 2-byte content size),
# dictionary id (2), then the content size's first byte (no magic number: the record says what it is).
CONTENT_SIZE_AT = 3
MAGIC = b"\x28\xb5\x2f\xfd"
# A plain frame's header: descriptor (single segment, no dictionary id, 2-byte content size), then
# the content size.
PLAIN = compress_plain(EVENT)
PLAIN_CONTENT_SIZE_AT = 1


def stored(frame: bytes) -> bytes:
    """A frame zstandard wrote, as a record stores it (without its magic number)."""
    assert frame[:4] == MAGIC
    return frame[4:]


def with_byte(frame: bytes, at: int, value: int) -> bytes:
    return frame[:at] + bytes([value]) + frame[at + 1 :]


def test_frame_header_is_what_the_format_says() -> None:
    """A value's frame is stored without zstd's magic number, names the dictionary by its id
    (32768 + version), states its content size, and is 8 bytes of header and block header."""
    descriptor, dictionary_id, content_size = struct.unpack_from("<BHH", FRAME)
    assert (descriptor, dictionary_id, content_size + 256) == (0x62, DICTIONARY_ID_BASE + 1, len(EVENT))
    assert zstandard.get_frame_parameters(MAGIC + FRAME).content_size == len(EVENT)
    block_size = int.from_bytes(FRAME[5:8], "little") >> 3
    assert len(FRAME) == 5 + 3 + block_size


def test_sound_records_decode_alike() -> None:
    """Compressed and plain records mixed decode to the same messages in both cores, values restored."""
    events = order_events(40)
    buf = b"".join(
        record(compress(value)) if i % 3 else reference.encode_record(value, b"key", 5)
        for i, value in enumerate(events)
    )
    compiled, pure = both(buf)
    assert compiled == pure
    assert [message.value for message in compiled] == events  # type: ignore[attr-defined]


HOSTILE: dict[str, bytes] = {
    "cut short by one byte": FRAME[:-1],
    "cut to its header": FRAME[:8],
    "content size says one more": with_byte(FRAME, CONTENT_SIZE_AT, (FRAME[CONTENT_SIZE_AT] + 1) % 256),
    "content size says one less": with_byte(FRAME, CONTENT_SIZE_AT, (FRAME[CONTENT_SIZE_AT] - 1) % 256),
    "a byte after the frame": FRAME + b"\x00",
    "two frames": FRAME + FRAME,
    "no content size": stored(
        zstandard.ZstdCompressor(
            dict_data=zstandard.ZstdCompressionDict(stream_dictionary()), write_content_size=False
        ).compress(EVENT)
    ),
    "plain: cut short by one byte": PLAIN[:-1],
    "plain: content size says one more": with_byte(
        PLAIN, PLAIN_CONTENT_SIZE_AT, (PLAIN[PLAIN_CONTENT_SIZE_AT] + 1) % 256
    ),
    "plain: content size says one less": with_byte(
        PLAIN, PLAIN_CONTENT_SIZE_AT, (PLAIN[PLAIN_CONTENT_SIZE_AT] - 1) % 256
    ),
    "plain: a byte after the frame": PLAIN + b"\x00",
    "plain: no content size": stored(zstandard.ZstdCompressor(write_content_size=False).compress(EVENT)),
    "plain: made with a dictionary it does not name": stored(
        zstandard.ZstdCompressor(
            dict_data=zstandard.ZstdCompressionDict(stream_dictionary()), write_dict_id=False
        ).compress(EVENT)
    ),
    "a dictionary the stream lacks": compress(EVENT, version=2),
    "raw dictionary content": stored(
        zstandard.ZstdCompressor(
            dict_data=zstandard.ZstdCompressionDict(trained_dictionary(), dict_type=zstandard.DICT_TYPE_RAWCONTENT)
        ).compress(EVENT)
    ),
    "the magic number kept": MAGIC + FRAME,
    "the reserved bit set": with_byte(FRAME, 0, FRAME[0] | 0x08),
    "a checksum flagged but missing": with_byte(FRAME, 0, FRAME[0] | 0x04),
    "a block of the reserved type": with_byte(FRAME, 5, FRAME[5] | 0x06),
    "the last block not marked last": with_byte(FRAME, 5, FRAME[5] & 0xFE),
    "not a frame": bytes(range(40)),
    "empty": b"",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_frames_are_damage_in_both_cores(name: str) -> None:
    """A frame that is not one whole frame of the stream's dictionaries, holding exactly the size it
    states, is a damaged record (or a missing dictionary) in both cores, with the same error."""
    buf = reference.encode_record(b"before", b"k", 1) + record(HOSTILE[name])
    compiled, pure = both(buf)
    assert compiled == pure
    assert isinstance(pure, tuple), pure
    assert pure[0] in ("CorruptRecordError", "CorruptStreamError")


def test_plain_frames_name_no_dictionary_and_decode_alike() -> None:
    """A plain zstd frame (a stream's values before its first dictionary) names no dictionary, states
    its content size, and decodes to its value in both cores with no dictionary file at all."""
    descriptor, content_size = struct.unpack_from("<BH", PLAIN)
    assert (descriptor, content_size + 256) == (0x60, len(EVENT))
    assert frame_dictionary_id(PLAIN) == 0
    events = order_events(30)
    buf = b"".join(
        record(compress_plain(value)) if i % 2 else record(compress(value)) for i, value in enumerate(events)
    )
    compiled, pure = both(buf)
    assert compiled == pure
    assert [message.value for message in pure] == events  # type: ignore[attr-defined]
    compiled, pure = both(record(PLAIN), versions=())  # the stream has no dictionary yet
    assert compiled == pure
    assert [message.value for message in pure] == [EVENT]  # type: ignore[attr-defined]


@pytest.mark.parametrize("frame", [PLAIN, FRAME], ids=["plain", "with a dictionary"])
def test_a_compressed_record_read_without_dictionaries_is_the_same_error_in_both_cores(frame: bytes) -> None:
    """A reader given no dictionaries (not its stream's reader) gets the reference's clear error for
    a sound compressed record from both cores, by run and by offsets."""
    buf = reference.encode_record(b"before", b"k", 1) + record(frame)
    runs = [
        outcome(lambda decode=decode: decode(buf, 0, 0, 2, max_record_bytes=LIMIT, dictionaries=None))  # type: ignore[misc]
        for decode in (core.decode_messages, reference.decode_messages)
    ]
    picked = [
        outcome(lambda decode=decode: decode(buf, 0, [0, 1], max_record_bytes=LIMIT, dictionaries=None))  # type: ignore[misc]
        for decode in (core.decode_at, core.reference_decode_at)
    ]
    assert runs[0] == runs[1] == picked[0] == picked[1]
    assert "given no zstd dictionaries" in runs[0][1]  # type: ignore[index]


@pytest.mark.parametrize("buf", [b"\x00" * 4, b"\x00" * 30, record(FRAME)[:-3]], ids=["short", "zeros", "torn"])
def test_damage_read_by_a_compressed_streams_reader_is_the_same_error_in_both_cores(buf: bytes) -> None:
    """Damage read with the stream's dictionaries gets the reference's error from both cores."""
    compiled = outcome(lambda: core.decode_messages(buf, 0, 0, 1, max_record_bytes=LIMIT, dictionaries=dictionaries(1)))
    pure = outcome(
        lambda: reference.decode_messages(buf, 0, 0, 1, max_record_bytes=LIMIT, dictionaries=dictionaries(1))
    )
    assert compiled == pure
    assert isinstance(pure, tuple)
    assert pure[0] == "CorruptRecordError"


def test_content_over_the_record_limit_is_damage() -> None:
    """A frame stating more bytes than the reader's record limit is refused before decompressing."""
    buf = record(FRAME)
    compiled, pure = both(buf, limit=len(EVENT) - 1)
    assert compiled == pure
    assert pure == ("CorruptRecordError", pure[1], 0)  # type: ignore[index]
    assert "content size" in pure[1]  # type: ignore[index]


def test_frame_naming_another_stream_dictionary_decodes_alike() -> None:
    """A frame whose dictionary id was rewritten to another version the stream has (a forgery: the
    record's CRC-32C was made over it) gets the same answer from both cores."""
    forged = FRAME[:1] + struct.pack("<H", DICTIONARY_ID_BASE + 2) + FRAME[3:]
    compiled, pure = both(record(forged), versions=(1, 2))
    assert compiled == pure


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=2000), min_size=1, max_size=12))
def test_values_round_trip_through_both_compressors(values: list[bytes]) -> None:
    """Any value compressed by either core's compressor decodes to itself in both cores."""
    frames = [compress(value) for value in values] + [compress_plain(value) for value in values]
    values = values + values
    if NATIVE is not None:
        prepared = NATIVE.zstd_prepare(stream_dictionary(), 3)
        plain = NATIVE.zstd_prepare(None, 3)
        frames += [NATIVE.zstd_compress(prepared, value) for value in values[: len(values) // 2]]
        frames += [NATIVE.zstd_compress(plain, value) for value in values[: len(values) // 2]]
        values = values + values
    compiled, pure = both(b"".join(map(record, frames)))
    assert compiled == pure
    assert [message.value for message in pure] == values  # type: ignore[attr-defined]


def test_frame_with_a_checksum_decodes_alike() -> None:
    """A frame carrying zstd's content checksum (not what adiskq writes, but a valid frame) decodes to
    its value in both cores."""
    checked = zstandard.ZstdCompressor(
        dict_data=zstandard.ZstdCompressionDict(stream_dictionary(1, seed=1)), write_checksum=True
    ).compress(EVENT)
    compiled, pure = both(record(stored(checked)))
    assert compiled == pure
    assert [message.value for message in pure] == [EVENT]  # type: ignore[attr-defined]


def test_dictionary_file_round_trips_and_refuses_damage() -> None:
    """A dictionary file reads back; a flipped byte anywhere in it is CorruptStreamError naming the file."""
    data = encode_dictionary_file(1, stream_dictionary(), core.crc32c)
    assert parse_dictionary_file(data, 1, "d", core.crc32c) == stream_dictionary()
    for at in (0, 9, 13, 17, 30, len(data) - 1):
        with pytest.raises(adiskq.CorruptStreamError, match="zstd dictionary file d is damaged"):
            parse_dictionary_file(with_byte(data, at, data[at] ^ 0x40), 1, "d", core.crc32c)
    with pytest.raises(adiskq.CorruptStreamError, match="version 2"):
        parse_dictionary_file(data, 2, "d", core.crc32c)
