"""The write side of Kafka transactions (``partition_writes``): records written as a transaction's
(a run encoded ahead as the gateway makes them, or Records to encode, awaited or now) carry its
producer's id and epoch on disk; a marker is a record with an offset of its own, fsynced before the
call returns whatever the stream's flush mode; a stream before format 5 refuses both.

Local stream only: the Kafka gateway's transactions in a stream's files; a Consumer of a
kafka:// topic reads Kafka's own with read_committed (README's capability table: Consumer)."""

from __future__ import annotations

import glob
import json
import os
import pathlib
from typing import Literal

import pytest
from support.syscalls import Syscalls

import adiskq
from adiskq._async import partition_writes
from adiskq._sansio import codec
from adiskq._sansio.codec import TransactionFields
from adiskq._sansio.core import pack_records, reference_pack_records
from adiskq._sansio.entries import EncodedRun
from adiskq._storage.stream import StreamReader

pytestmark = pytest.mark.anyio

PRODUCER = (4000, 7)


def stored_on_disk(path: str, partition: int = 0) -> list[codec.DecodedRecord]:
    """Every record of a partition's ``.data`` files, decoded by the reference."""
    records: list[codec.DecodedRecord] = []
    for data_file in sorted(glob.glob(os.path.join(path, "parts", f"{partition:06d}", "*.data"))):
        with open(data_file, "rb") as file:
            buf = file.read()
        position = 0
        while position < len(buf):
            decoded = codec.decode_record(buf, position)
            assert decoded is not codec.NEED_MORE
            records.append(decoded)
            position = decoded.end
    return records


def run_of(values: list[bytes]) -> EncodedRun:
    """A run of stored records, as the gateway's Produce makes one."""
    items: list[adiskq.Record | bytes] = [adiskq.Record(value, key=b"k", timestamp=1) for value in values]
    packed = pack_records(items, 0, 1 << 20) or reference_pack_records(items, 0, 1 << 20)
    assert packed is not None
    return EncodedRun(packed.data, packed.index_entries, packed.time_entries, packed.key_hashes, b"", packed.largest)


@pytest.mark.parametrize("way", ["run", "run now", "records", "records now"])
@pytest.mark.parametrize("compression", [None, "zstd"])
async def test_a_transaction_s_records_carry_its_producer_and_its_marker_an_offset(
    stream_path: str, way: str, compression: Literal["zstd"] | None
) -> None:
    values = [b"a", b"b", b"c"]
    records: partition_writes.Writable = (
        run_of(values) if way.startswith("run") else [adiskq.Record(v, key=b"k") for v in values]
    )
    async with adiskq.Producer(stream_path, compression=compression) as producer:
        before = await producer.push(b"outside")
        if way.endswith("now"):
            first = partition_writes.write_now(producer, 0, records, transaction=PRODUCER)
        else:
            first = await partition_writes.write(producer, 0, records, transaction=PRODUCER)
        marker = await partition_writes.write_marker(producer, 0, *PRODUCER, commit=True, coordinator_epoch=3)
        abort = await partition_writes.write_marker(producer, 0, *PRODUCER, commit=False, coordinator_epoch=3)
        after = await producer.push(b"after")
    assert (before.offset, first, marker, abort, after.offset) == (0, 1, 4, 5, 6)
    stored = stored_on_disk(stream_path)
    assert [record.value for record in stored[1:4]] == values
    assert [record.transaction for record in stored] == [
        None,
        *[TransactionFields(*PRODUCER)] * 3,
        TransactionFields(*PRODUCER, True, 3, 1),
        TransactionFields(*PRODUCER, False, 3, -1),  # the commit ended the transaction: none is open
        None,
    ]
    assert all(record.key == b"k" for record in stored[1:4])


async def test_a_marker_is_fsynced_before_it_returns_on_an_async_flushed_stream(
    stream_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``flush="async"`` leaves pushes to the flusher thread; a marker is made durable by its own
    call, with one fdatasync of the partition's ``.data`` (recovery rebuilds the index files from
    the data, so syncing them too would only make the ending slower)."""
    async with adiskq.Producer(stream_path, flush="async", flush_interval=3600) as producer:
        await partition_writes.write(producer, 0, run_of([b"x"]), transaction=PRODUCER)
        synced: list[str] = []
        for name in ("fsync", "fdatasync"):
            real = getattr(os, name)

            def recording(fd: int, real: object = real) -> None:
                synced.append(os.readlink(f"/proc/self/fd/{fd}"))
                real(fd)  # type: ignore[operator]

            monkeypatch.setattr(os, name, recording)
        await partition_writes.write_marker(producer, 0, *PRODUCER, commit=True, coordinator_epoch=0)
        monkeypatch.undo()
    assert [os.path.basename(path) for path in synced] == [f"{0:020d}.data"], synced


@pytest.mark.parametrize("flush", ["async", "sync"])
async def test_a_committed_transaction_survives_a_power_cut_once_its_marker_returned(
    stream_path: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, flush: Literal["async", "sync"]
) -> None:
    """Whatever the flush: the stream as a power cut right after ``write_marker`` returned leaves
    it (each file as of its last fsync) opens with the transaction's records, committed."""
    async with adiskq.Producer(stream_path, flush="async", flush_interval=3600) as setup:
        await setup.push(b"before", key=b"k")  # the stream exists before the calls are tracked
    syscalls = Syscalls(stream_path, monkeypatch)
    syscalls.start(track_durability=True)
    async with adiskq.Producer(stream_path, flush=flush, flush_interval=3600) as producer:
        await partition_writes.write(producer, 0, run_of([b"a", b"b"]), transaction=PRODUCER)
        await partition_writes.write_marker(producer, 0, *PRODUCER, commit=True, coordinator_epoch=0)
        _died, power, _torn = syscalls.save_crash_states(str(tmp_path / "crash"), 0)
    syscalls.stop()
    monkeypatch.undo()
    async with adiskq.Producer(power):  # recovery runs as the next producer opens
        pass
    with StreamReader.open(power).partition(0).cursor(0) as cursor:
        assert [bytes(m.value) for m in cursor.read(10)] == [b"before", b"a", b"b"]
        assert cursor.position == 4  # the marker passed: the transaction ended, committed


def _as_format_3(path: str) -> None:
    settings_file = os.path.join(path, "settings.json")
    with open(settings_file) as file:
        settings = json.load(file)
    with open(settings_file, "w") as file:
        json.dump(settings | {"format": "adiskq/3"}, file)


async def test_a_stream_before_format_5_refuses_a_transaction(stream_path: str) -> None:
    async with adiskq.Producer(stream_path) as producer:
        await producer.push(b"first")
    _as_format_3(stream_path)
    async with adiskq.Producer(stream_path) as producer:
        with pytest.raises(adiskq.SettingsMismatchError, match="adiskq upgrade"):
            await partition_writes.write(producer, 0, run_of([b"x"]), transaction=PRODUCER)
        with pytest.raises(adiskq.SettingsMismatchError, match="adiskq upgrade"):
            partition_writes.write_now(producer, 0, [adiskq.Record(b"x")], transaction=PRODUCER)
        with pytest.raises(adiskq.SettingsMismatchError, match="adiskq upgrade"):
            await partition_writes.write_marker(producer, 0, *PRODUCER, commit=False, coordinator_epoch=0)
    assert [record.value for record in stored_on_disk(stream_path)] == [b"first"]
