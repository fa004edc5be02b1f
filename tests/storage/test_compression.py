"""compression="zstd": values stored compressed with the stream's dictionaries, read back as they were
pushed by every reader; dictionaries trained, given, rotated, damaged and missing."""

from __future__ import annotations

import json
import os
import pathlib
import random
import struct

import anyio
import pytest
from support.cli import invoke
from support.compression import order_events, trained_dictionary

import adiskq
from adiskq._async import compressing
from adiskq._sansio import codec, compression
from adiskq._sansio.compression import COMPRESSED, DICTIONARY_ID_BASE
from adiskq._sansio.naming import PARTS_DIR, partition_dir_name

pytestmark = pytest.mark.anyio

EVENTS = order_events(2600)


def dictionary_file(stream_path: str, version: int = 1) -> pathlib.Path:
    return pathlib.Path(stream_path, "dictionaries", f"zstd-{version:08d}.dict")


def stored_records(stream_path: str) -> list[codec.DecodedRecord]:
    """The records of partition 0's first segment as stored (values not decompressed)."""
    data = pathlib.Path(stream_path, PARTS_DIR, partition_dir_name(0), f"{0:020d}.data").read_bytes()
    records = []
    position = 0
    while position < len(data):
        decoded = codec.decode_record(data, position)
        assert not isinstance(decoded, codec.NeedMore)
        records.append(decoded)
        position = decoded.end
    return records


def settings_of(stream_path: str) -> bytes:
    return pathlib.Path(stream_path, "settings.json").read_bytes()


def frame_version(record: codec.DecodedRecord) -> int:
    """The dictionary version a compressed record's frame names."""
    (dictionary_id,) = struct.unpack_from("<H", record.value, 1)
    return int(dictionary_id) - DICTIONARY_ID_BASE


async def drain(stream_path: str) -> list[bytes]:
    with anyio.fail_after(20):
        async with adiskq.Consumer(stream_path, start="oldest", end="close") as consumer:
            return [message.value async for message in consumer]


async def push_events(stream_path: str, events: list[bytes], **options: object) -> None:
    """Half pushed one by one, half with push_many, each with its own key."""
    half = len(events) // 2
    async with adiskq.Producer(stream_path, compression="zstd", **options) as producer:  # type: ignore[arg-type]
        for number, value in enumerate(events[:half]):
            await producer.push(value, key=f"order-{number}")
        await producer.push_many(
            [adiskq.Record(value, key=f"order-{half + i}") for i, value in enumerate(events[half:])]
        )


async def test_compressed_stream_reads_back_every_value(stream_path: str) -> None:
    """Values pushed to a compressed stream (push and push_many) are read back as pushed, from sealed
    segments and the active one, and its settings say format adiskq/5 with zstd compression."""
    await push_events(stream_path, EVENTS, segment_size_bytes=65536)
    assert len(os.listdir(os.path.join(stream_path, PARTS_DIR, partition_dir_name(0)))) > 10
    assert await drain(stream_path) == EVENTS
    settings = json.loads(settings_of(stream_path))
    assert (settings["format"], settings["compression"]) == ("adiskq/5", "zstd")


def dictionary_ids(records: list[codec.DecodedRecord]) -> list[int | None]:
    """The dictionary id each record's frame names (0: plain zstd), None for a value stored raw."""
    return [compression.frame_dictionary_id(r.value) if r.attributes & COMPRESSED else None for r in records]


async def test_first_values_train_the_dictionary_then_values_are_compressed(stream_path: str) -> None:
    """The first 2,000 values are stored in plain zstd frames (no dictionary) and train dictionary
    version 1; the values pushed after are stored compressed with it, each far smaller."""
    async with adiskq.Producer(stream_path, compression="zstd") as producer:
        for number, value in enumerate(EVENTS[:2300]):
            await producer.push(value, key=f"order-{number}")
        await producer.push_many(EVENTS[2300:])
    assert dictionary_file(stream_path).is_file()
    records = stored_records(stream_path)
    assert dictionary_ids(records) == [0] * 2000 + [DICTIONARY_ID_BASE + 1] * (len(EVENTS) - 2000)
    assert {frame_version(r) for r in records[2000:]} == {1}
    assert await drain(stream_path) == EVENTS
    compressed = sum(len(r.value) for r in records[2000:])
    assert compressed < 0.4 * sum(map(len, EVENTS[2000:]))


async def test_a_new_streams_first_large_batch_trains_the_dictionary_and_is_stored_compressed(
    stream_path: str,
) -> None:
    """One push_many of 2,600 values to a new compressed stream trains the dictionary from the batch
    before writing it: every value is stored compressed, in far fewer bytes than raw."""
    async with adiskq.Producer(stream_path, compression="zstd") as producer:
        await producer.push_many([adiskq.Record(value, key=f"order-{i}") for i, value in enumerate(EVENTS)])
    assert dictionary_file(stream_path).is_file()
    records = stored_records(stream_path)
    assert all(r.attributes & COMPRESSED for r in records)
    assert sum(len(r.value) for r in records) < 0.4 * sum(map(len, EVENTS))
    assert await drain(stream_path) == EVENTS


async def test_a_small_first_batch_is_stored_in_plain_frames_and_the_next_batch_that_reaches_the_samples_trains(
    stream_path: str,
) -> None:
    """A batch that does not bring the samples to 2,000 is stored in plain zstd frames (and kept as
    samples); the batch that does trains from both and is stored compressed with the dictionary."""
    async with adiskq.Producer(stream_path, compression="zstd") as producer:
        await producer.push_many(EVENTS[:500])
        await producer.push_many(EVENTS[500:])
    records = stored_records(stream_path)
    assert dictionary_ids(records) == [0] * 500 + [DICTIONARY_ID_BASE + 1] * (len(EVENTS) - 500)
    assert await drain(stream_path) == EVENTS


async def test_a_new_streams_first_single_pushes_are_stored_in_plain_zstd_frames(stream_path: str) -> None:
    """Before its dictionary exists, a new compressed stream stores each value pushed one by one in
    a plain zstd frame (no dictionary file needed to read it), smaller than the value, and every
    reader gets the values back as pushed."""
    events = EVENTS[:1000]
    async with adiskq.Producer(stream_path, compression="zstd") as producer:
        for number, value in enumerate(events):
            await producer.push(value, key=f"order-{number}")
    assert not dictionary_file(stream_path).exists()
    records = stored_records(stream_path)
    assert dictionary_ids(records) == [0] * len(events)
    assert all(len(r.value) < len(value) for r, value in zip(records, events, strict=True))
    assert sum(len(r.value) for r in records) < 0.8 * sum(map(len, events))
    with anyio.fail_after(20):
        async with adiskq.Consumer(stream_path, start="oldest", end="close") as consumer:
            batched = [message.value async for batch in consumer.batches() for message in batch]
        async with adiskq.ConsumerGroup(stream_path, "audit", start="oldest", end="close") as group:
            grouped = [message.value async for message in group]
    assert batched == grouped == events
    assert adiskq.read(stream_path, 0, 7).value == events[7]
    assert [message.value for message in adiskq.find(stream_path, "order-3")] == [events[3]]
    assert invoke("read", stream_path, "--format", "value").stdout.splitlines() == [e.decode() for e in events]
    assert invoke("check", stream_path).exit_code == 0


async def test_a_value_plain_zstd_does_not_shrink_is_stored_raw(stream_path: str) -> None:
    """Before the dictionary exists, a value whose plain zstd frame would not be smaller (short, or
    random bytes) is stored as it is, by push and push_many alike; compressible ones beside it are
    compressed, and all read back as pushed."""
    noise = random.Random(5).randbytes(300)
    values = [b"", b"x", noise, EVENTS[0], b"ab" * 200]
    async with adiskq.Producer(stream_path, compression="zstd") as producer:
        for value in values:
            await producer.push(value)
        await producer.push_many(values)
    assert dictionary_ids(stored_records(stream_path)) == [None, None, None, 0, 0] * 2
    assert await drain(stream_path) == values + values


async def test_given_dictionary_compresses_from_the_first_value(stream_path: str) -> None:
    """zstd_dictionary= is stored as version 1 and compresses every value from the first."""
    await push_events(stream_path, EVENTS[:50], zstd_dictionary=trained_dictionary())
    assert all(record.attributes & COMPRESSED for record in stored_records(stream_path))
    assert await drain(stream_path) == EVENTS[:50]


async def test_a_new_dictionary_is_a_new_version_and_older_records_keep_theirs(stream_path: str) -> None:
    """Opening with another dictionary stores it as version 2; records made with version 1 still
    read, and reopening with the same dictionary adds no version."""
    await push_events(stream_path, EVENTS[:40], zstd_dictionary=trained_dictionary(seed=7))
    await push_events(stream_path, EVENTS[40:80], zstd_dictionary=trained_dictionary(seed=8))
    await push_events(stream_path, EVENTS[80:120], zstd_dictionary=trained_dictionary(seed=8))
    assert sorted(os.listdir(os.path.join(stream_path, "dictionaries"))) == ["zstd-00000001.dict", "zstd-00000002.dict"]
    assert [frame_version(r) for r in stored_records(stream_path)] == [1] * 40 + [2] * 80
    assert await drain(stream_path) == EVENTS[:120]


async def test_a_producer_without_a_dictionary_argument_keeps_the_newest(stream_path: str) -> None:
    """A producer opened later with compression="zstd" alone compresses with the newest version."""
    await push_events(stream_path, EVENTS[:10], zstd_dictionary=trained_dictionary(seed=7))
    await push_events(stream_path, EVENTS[10:20], zstd_dictionary=trained_dictionary(seed=8))
    await push_events(stream_path, EVENTS[20:30])
    assert [frame_version(r) for r in stored_records(stream_path)][20:] == [2] * 10
    assert await drain(stream_path) == EVENTS[:30]


async def test_a_damaged_dictionary_is_a_clear_error_and_nothing_is_lost(stream_path: str) -> None:
    """A dictionary file with a flipped byte makes the records needing it fail with CorruptStreamError
    naming the file; restoring the file reads every value back."""
    await push_events(stream_path, EVENTS[:30], zstd_dictionary=trained_dictionary())
    path = dictionary_file(stream_path)
    sound = path.read_bytes()
    path.write_bytes(sound[:100] + bytes([sound[100] ^ 1]) + sound[101:])
    with pytest.raises(adiskq.CorruptStreamError, match=r"zstd-00000001\.dict is damaged \(CRC-32C mismatch\)"):
        await drain(stream_path)
    path.write_bytes(sound)
    assert await drain(stream_path) == EVENTS[:30]


async def test_a_missing_dictionary_is_a_clear_error(stream_path: str) -> None:
    """A dictionary file that is gone makes the records needing it fail with CorruptStreamError
    saying it is missing and which version, never a value."""
    await push_events(stream_path, EVENTS[:30], zstd_dictionary=trained_dictionary())
    sound = dictionary_file(stream_path).read_bytes()
    dictionary_file(stream_path).unlink()
    with pytest.raises(adiskq.CorruptStreamError, match=r"zstd-00000001\.dict is missing.*version 1"):
        await drain(stream_path)
    with pytest.raises(adiskq.CorruptStreamError, match="is missing"):
        adiskq.read(stream_path, 0, 0)
    dictionary_file(stream_path).write_bytes(sound)
    assert adiskq.read(stream_path, 0, 0).value == EVENTS[0]


async def test_compression_on_a_stream_made_without_it_is_refused(stream_path: str) -> None:
    """compression="zstd" on a stream created uncompressed is refused (an older reader may have it
    open), saying what to do; the stream is left as it was."""
    async with adiskq.Producer(stream_path) as producer:
        await producer.push(b"plain")
    before = settings_of(stream_path)
    with pytest.raises(adiskq.SettingsMismatchError, match=r"created without compression.*Create a new stream"):
        async with adiskq.Producer(stream_path, compression="zstd"):
            pass
    assert settings_of(stream_path) == before


async def test_compression_is_the_streams_setting(stream_path: str) -> None:
    """A producer opened without compression= on a compressed stream compresses too, with the
    stream's newest dictionary: compression is stored in the stream like its other settings."""
    await push_events(stream_path, EVENTS[:10], zstd_dictionary=trained_dictionary())
    async with adiskq.Producer(stream_path) as producer:
        await producer.push(EVENTS[10])
    assert [bool(r.attributes & COMPRESSED) for r in stored_records(stream_path)] == [True] * 11
    assert await drain(stream_path) == EVENTS[:11]


async def test_every_reader_decompresses(stream_path: str) -> None:
    """Consumer batches, a consumer group, adiskq.read, adiskq.find and `adiskq read` all give the values as pushed."""
    await push_events(stream_path, EVENTS[:20], zstd_dictionary=trained_dictionary())
    with anyio.fail_after(20):
        async with adiskq.Consumer(stream_path, start="oldest", end="close") as consumer:
            batched = [message.value async for batch in consumer.batches() for message in batch]
        async with adiskq.ConsumerGroup(stream_path, "audit", start="oldest", end="close") as group:
            grouped = [message.value async for message in group]
    assert batched == grouped == EVENTS[:20]
    assert adiskq.read(stream_path, 0, 7).value == EVENTS[7]
    assert [message.value for message in adiskq.find(stream_path, "order-3")] == [EVENTS[3]]
    shown = invoke("read", stream_path, "--format", "value").stdout.splitlines()
    assert shown == [event.decode() for event in EVENTS[:20]]


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"compression": "lz4"}, 'give "zstd"'),
        ({"zstd_dictionary": b"x" * 64}, "give both"),
        ({"compression": "zstd", "zstd_dictionary": b"x" * 64}, "magic number 0xEC30A437"),
    ],
)
def test_bad_compression_arguments_are_refused(stream_path: str, options: dict[str, object], error: str) -> None:
    """An unknown codec, a dictionary without compression, or bytes that are not a zstd dictionary
    are refused at construction, before anything is created."""
    with pytest.raises(adiskq.InvalidArgumentError, match=error):
        adiskq.Producer(stream_path, **options)  # type: ignore[arg-type]
    assert not os.path.exists(stream_path)


def damage(path: pathlib.Path, at: int) -> bytes:
    """Flip one bit of the file at byte ``at``; its sound bytes are returned."""
    sound = path.read_bytes()
    path.write_bytes(sound[:at] + bytes([sound[at] ^ 1]) + sound[at + 1 :])
    return sound


async def test_check_reports_a_damaged_dictionary_and_the_records_needing_it(stream_path: str) -> None:
    """`adiskq check` names a damaged dictionary file, and the offsets of the records that need it."""
    await push_events(stream_path, EVENTS[:30], zstd_dictionary=trained_dictionary())
    assert invoke("check", stream_path).exit_code == 0
    path = dictionary_file(stream_path)
    damage(path, 100)
    result = invoke("check", stream_path)
    assert result.exit_code == 1
    assert f"{path}: zstd dictionary file {path} is damaged (CRC-32C mismatch)" in result.stdout
    assert "30 compressed records (offsets 0..29) cannot be read: zstd dictionary file" in result.stdout


async def test_a_filtering_consumer_reads_compressed_values(stream_path: str) -> None:
    """A consumer filtering by tag gets the values of the records it selects decompressed, dense
    (read in runs) and rare (read one by one)."""
    records = [
        adiskq.Record(value, key=f"order-{i}", tag="paid" if i % 3 else "created", headers={"rare": b""})
        if i % 400
        else adiskq.Record(value, key=f"order-{i}", tag="rare")
        for i, value in enumerate(EVENTS)
    ]
    async with adiskq.Producer(stream_path, compression="zstd", zstd_dictionary=trained_dictionary()) as producer:
        await producer.push_many(records)
    with anyio.fail_after(20):
        async with adiskq.Consumer(stream_path, start="oldest", end="close", tags={"created"}) as consumer:
            got = [message.value async for message in consumer]
        async with adiskq.Consumer(stream_path, start="oldest", end="close", tags={"rare"}) as consumer:
            rare = [message.value async for message in consumer]
    assert got == [value for i, value in enumerate(EVENTS) if i % 400 and not i % 3]
    assert rare == EVENTS[::400]


async def test_max_message_bytes_counts_the_value_uncompressed(stream_path: str) -> None:
    """A value over max_message_bytes is refused by push and push_many even where it compresses
    far below it: the limit is the message's size, whatever it takes on disk."""
    async with adiskq.Producer(
        stream_path, compression="zstd", zstd_dictionary=trained_dictionary(), max_message_bytes=1000
    ) as producer:
        with pytest.raises(adiskq.MessageTooLargeError):
            await producer.push(bytes(2000))
        with pytest.raises(adiskq.MessageTooLargeError):
            await producer.push_many([EVENTS[0], bytes(2000)])
        await producer.push_many([bytes(900), EVENTS[0]])
    assert await drain(stream_path) == [bytes(900), EVENTS[0]]


def test_cli_write_creates_a_compressed_stream(stream_path: str, tmp_path: pathlib.Path) -> None:
    """`adiskq write --compression zstd` creates a compressed stream (its first 2,000 lines train the
    dictionary), and `adiskq read` prints every line back."""
    events = order_events(5000)
    source = tmp_path / "events.jsonl"
    source.write_bytes(b"\n".join(events) + b"\n")
    assert invoke("write", stream_path, os.fspath(source), "--compression", "zstd").exit_code == 0
    assert json.loads(settings_of(stream_path))["compression"] == "zstd"
    assert sum(bool(r.attributes & COMPRESSED) for r in stored_records(stream_path)) > 500
    assert invoke("read", stream_path, "--format", "value").stdout.splitlines() == [e.decode() for e in events]


def test_cli_write_compression_on_a_plain_stream_is_refused(stream_path: str) -> None:
    """`adiskq write --compression zstd` on a stream made without it fails with one line saying why."""
    assert invoke("write", stream_path, input="plain\n").exit_code == 0
    result = invoke("write", stream_path, "--compression", "zstd", input="more\n")
    assert result.exit_code != 0
    assert "created without compression" in result.stderr


class NoLibzstd:
    """The compiled core where libzstd.so.1 cannot be loaded: zstd_prepare answers None."""

    @staticmethod
    def zstd_prepare(dictionary: bytes | None, level: int) -> None:
        return None


async def test_without_libzstd_the_zstd_binding_compresses_and_decompresses(
    stream_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where libzstd cannot be loaded, values are compressed and read back through the zstandard
    binding instead, the same bytes in the same records."""
    monkeypatch.setattr(compression, "NATIVE", NoLibzstd)
    await push_events(stream_path, EVENTS[:40], zstd_dictionary=trained_dictionary())
    assert all(record.attributes & COMPRESSED for record in stored_records(stream_path))
    assert await drain(stream_path) == EVENTS[:40]
    monkeypatch.undo()
    assert await drain(stream_path) == EVENTS[:40]


async def test_without_libzstd_the_zstd_binding_writes_and_reads_plain_frames(
    stream_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where libzstd cannot be loaded, a new stream's first values go into plain zstd frames through
    the zstandard binding, the same bytes the compiled core writes, and both read them back."""
    monkeypatch.setattr(compression, "NATIVE", NoLibzstd)
    monkeypatch.setattr(compressing, "NATIVE", NoLibzstd)
    await push_events(stream_path, EVENTS[:40])
    records = stored_records(stream_path)
    assert dictionary_ids(records) == [0] * 40
    assert [r.value for r in records] == [compression.ReferencePlain(3).compress(e) for e in EVENTS[:40]]
    assert await drain(stream_path) == EVENTS[:40]
    monkeypatch.undo()
    assert await drain(stream_path) == EVENTS[:40]
