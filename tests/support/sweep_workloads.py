"""The operations the system-call sweeps walk, and the invariants checked after each run.

A workload sets its stream up (uncounted), then calls ``begin()`` before the operation under test
and ``end()`` after it, and records every message acknowledged to it in ``run.acked``. After the
operation it does one more (a push) with the fault cleared: the process must be able to go on.
"""

from __future__ import annotations

import dataclasses
import os
import random
from collections.abc import Awaitable, Callable

import anyio
import pyarrow as pa

import adiskq
from adiskq._async import partition_writes
from adiskq._storage.log_start import save_log_start
from adiskq._storage.offsets import load_offsets
from adiskq._storage.stream import StreamWriter
from adiskq.spark._encode import Columns, Grouped
from adiskq.spark._sink import SinkCommitter, stage
from support.cli import invoke
from support.compression import trained_dictionary

Step = Callable[[], None]


@dataclasses.dataclass
class Run:
    """What one run of a workload did."""

    path: str
    flush: str = "async"
    acked: dict[tuple[int, int], bytes] = dataclasses.field(default_factory=dict)  # (partition, offset) -> value
    setup: set[bytes] = dataclasses.field(default_factory=set)  # values written before begin()
    failures: list[BaseException] = dataclasses.field(default_factory=list)
    exactly_once: bool = False  # every attempted value must end up in the stream once (the Spark sink)
    attempted: set[bytes] = dataclasses.field(default_factory=set)

    def ack(self, receipt: adiskq.Receipt | None, value: bytes) -> None:
        if receipt is not None:
            self.acked[(receipt.partition, receipt.offset)] = value

    def ack_many(self, receipts: list[adiskq.Receipt] | list[adiskq.Receipt | None], values: list[bytes]) -> None:
        for receipt, value in zip(receipts, values, strict=True):
            self.ack(receipt, value)


Workload = Callable[[Run, Step, Step], Awaitable[None]]

# Large enough that no background flush or vacuum runs during a sweep: the calls counted are the
# operation's own, in the same order every run.
QUIET = {"flush_interval": 3600.0, "vacuum_interval": 3600.0}


async def _push_all(producer: adiskq.Producer, run: Run, values: list[bytes], key: str | None = None) -> None:
    for value in values:
        run.attempted.add(value)
        try:
            run.ack(await producer.push(value, key=key), value)
        except OSError as error:
            run.failures.append(error)


async def _push_many(producer: adiskq.Producer, run: Run, records: list[adiskq.Record]) -> None:
    values = [record.value for record in records]
    run.attempted.update(values)
    try:
        run.ack_many(await producer.push_many(records), values)
    except adiskq.PartialWriteError as error:
        run.ack_many(error.receipts, values)
        run.failures.append(error)
    except OSError as error:
        run.failures.append(error)


async def _go_on(producer: adiskq.Producer, run: Run, partitions: int = 1) -> None:
    """With the fault cleared, the producer writes again."""
    for partition in range(partitions):
        value = b"after-%d" % partition
        run.attempted.add(value)
        run.ack(await producer.push(value, key=_key_for(partition, partitions)), value)


def _key_for(partition: int, partitions: int) -> str:
    from adiskq._sansio.naming import fnv1_32

    i = 0
    while fnv1_32(f"key-{i}".encode()) % partitions != partition:
        i += 1
    return f"key-{i}"


async def push(run: Run, begin: Step, end: Step) -> None:
    async with adiskq.Producer(run.path, flush=run.flush, **QUIET) as producer:  # type: ignore[arg-type]
        await _push_all(producer, run, [b"setup"])
        run.setup.add(b"setup")
        begin()
        await _push_all(producer, run, [b"push-%d" % i for i in range(3)])
        end()
        await _go_on(producer, run)


async def push_many_one_partition(run: Run, begin: Step, end: Step) -> None:
    async with adiskq.Producer(run.path, flush=run.flush, **QUIET) as producer:  # type: ignore[arg-type]
        begin()
        await _push_many(producer, run, [adiskq.Record(b"many-%d" % i) for i in range(20)])
        end()
        await _go_on(producer, run)


async def push_many_three_partitions(run: Run, begin: Step, end: Step) -> None:
    async with adiskq.Producer(run.path, partitions=3, flush=run.flush, **QUIET) as producer:  # type: ignore[arg-type]
        begin()
        await _push_many(producer, run, [adiskq.Record(b"many-%d" % i, key=f"k{i}") for i in range(30)])
        end()
        await _go_on(producer, run, 3)


async def roll(run: Run, begin: Step, end: Step) -> None:
    async with adiskq.Producer(run.path, segment_size_bytes=1024, flush=run.flush, **QUIET) as producer:  # type: ignore[arg-type]
        await _push_all(producer, run, [b"s" * 300 + b"%d" % i for i in range(3)])
        run.setup.update(run.acked.values())
        begin()
        await _push_all(producer, run, [b"r" * 300 + b"%d" % i for i in range(4)])  # rolls once or twice
        end()
        await _go_on(producer, run)


async def vacuum(run: Run, begin: Step, end: Step) -> None:
    retention = adiskq.Retention(max_bytes=2048)
    async with adiskq.Producer(
        run.path,
        segment_size_bytes=1024,
        retention=retention,
        flush=run.flush,
        **QUIET,  # type: ignore[arg-type]
    ) as producer:
        await _push_all(producer, run, [b"v" * 300 + b"%d" % i for i in range(12)])
        run.setup.update(run.acked.values())
        begin()
        try:
            await producer.vacuum()
        except OSError as error:
            run.failures.append(error)
        end()
        await _go_on(producer, run)
    # What vacuum deleted on purpose is no longer expected.
    oldest = adiskq.stats(run.path).partitions[0].oldest_offset
    run.acked = {place: value for place, value in run.acked.items() if place[1] >= oldest}


async def close(run: Run, begin: Step, end: Step) -> None:
    producer = adiskq.Producer(run.path, flush=run.flush, **QUIET)  # type: ignore[arg-type]
    async with producer:
        await _push_all(producer, run, [b"before-close-%d" % i for i in range(3)])
        begin()
        try:
            await producer.aclose()
        except OSError as error:
            run.failures.append(error)
        end()
    async with adiskq.Producer(run.path, **QUIET) as again:
        await _go_on(again, run)


def _append_torn_record(path: str) -> None:
    with open(path, "ab") as data:
        data.write(b"\x40\x00\x00\x00torn")


async def recovery_on_open(run: Run, begin: Step, end: Step) -> None:
    async with adiskq.Producer(run.path, flush="sync", **QUIET) as producer:
        await _push_all(producer, run, [b"recover-%d" % i for i in range(5)])
    # A crash-like state: no clean-close record, half a record at the end of .data.
    os.unlink(os.path.join(run.path, "recovery.json"))
    _append_torn_record(os.path.join(run.path, "parts", "000000", f"{0:020d}.data"))
    begin()
    try:
        async with adiskq.Producer(run.path, **QUIET) as producer:
            end()
            await _go_on(producer, run)
            return
    except OSError as error:
        run.failures.append(error)
    end()
    async with adiskq.Producer(run.path, **QUIET) as producer:
        await _go_on(producer, run)


async def check_repair(run: Run, begin: Step, end: Step) -> None:
    async with adiskq.Producer(run.path, segment_size_bytes=1024, **QUIET) as producer:
        await _push_all(producer, run, [b"c" * 300 + b"%d" % i for i in range(6)])
    sealed_time_index = os.path.join(run.path, "parts", "000000", f"{0:020d}.timeindex")
    os.unlink(sealed_time_index)  # damage that --repair rebuilds
    begin()
    result = await anyio.to_thread.run_sync(lambda: invoke("check", run.path, "--repair"))
    end()
    if result.exit_code != 0:
        run.failures.append(RuntimeError(result.output))
    async with adiskq.Producer(run.path, **QUIET) as producer:
        await _go_on(producer, run)


async def group_commit(run: Run, begin: Step, end: Step) -> None:
    async with adiskq.Producer(run.path, partitions=2, **QUIET) as producer:
        await _push_many(producer, run, [adiskq.Record(b"g-%d" % i, key=f"k{i}") for i in range(10)])
    begin()
    try:
        async with adiskq.ConsumerGroup(run.path, name="billing", end="close") as group:
            async for message in group:
                group.commit(message)
            await group.flush()
    except OSError as error:
        run.failures.append(error)
    end()
    stored = load_offsets(run.path, "billing")  # readable, whatever failed
    bounds = {p.partition: p.next_offset for p in adiskq.stats(run.path).partitions}
    assert all(0 <= offset <= bounds[partition] for partition, offset in stored.items()), stored
    async with adiskq.ConsumerGroup(run.path, name="billing", end="close") as group:  # the group goes on
        async for message in group:
            group.commit(message)
    assert load_offsets(run.path, "billing") == bounds
    async with adiskq.Producer(run.path, **QUIET) as producer:
        await _go_on(producer, run, 2)


async def spark_sink_commit(run: Run, begin: Step, end: Step) -> None:
    StreamWriter.open(run.path, partitions=2).close()
    checkpoint = run.path + "-checkpoint"
    os.makedirs(checkpoint, exist_ok=True)
    rows = [(b"k%d" % i, b"row-%d" % i) for i in range(20)]
    run.attempted.update(value for _, value in rows)
    run.exactly_once = True

    def staged() -> list[object]:
        grouped = Grouped(2)
        batch = pa.record_batch({"key": [k for k, _ in rows], "value": [v for _, v in rows]})
        grouped.encode(batch, Columns(has_key=True, has_headers=False, has_timestamp=False), 1 << 20)
        return [stage(checkpoint, grouped)]

    committer = SinkCommitter(checkpoint, run.path, 5.0)
    first = staged()
    begin()
    try:
        committer.commit(0, first)  # type: ignore[arg-type]
    except OSError as error:
        run.failures.append(error)
        committer.discard(first)  # type: ignore[arg-type]  # Spark's abort
    end()
    committer.commit(0, staged())  # type: ignore[arg-type]  # Spark's retry of the batch
    async with adiskq.Producer(run.path, **QUIET) as producer:
        await _go_on(producer, run, 2)


async def spark_batch_write(run: Run, begin: Step, end: Step) -> None:
    """A Spark batch write's commit on the driver (``AdiskqBatchWriter.commit``): its tasks staged the
    rows; a failed commit's job fails, and Spark's retry of the job stages and commits them again."""
    import types

    from adiskq.spark._writer import AdiskqBatchWriter

    StreamWriter.open(run.path, partitions=2).close()
    rows = [(b"k%d" % i, b"batch-%d" % i) for i in range(20)]
    options = types.SimpleNamespace(path=run.path, lock_timeout=5.0, refuse_writes_above=0.95)
    columns = Columns(has_key=True, has_headers=False, has_timestamp=False)
    facts = types.SimpleNamespace(partition_count=2, max_message_bytes=1 << 20)
    batch = pa.record_batch({"key": [k for k, _ in rows], "value": [v for _, v in rows]})
    run.attempted.update(value for _, value in rows)
    writer = AdiskqBatchWriter(options, columns, facts)  # type: ignore[arg-type]
    task = writer.write(iter([batch]))
    begin()
    try:
        writer.commit([task])
        stream = stream_messages(run.path)
        run.acked.update(stream)  # the job reported success: all of it counts as acknowledged
    except OSError as error:
        run.failures.append(error)
    end()
    async with adiskq.Producer(run.path, **QUIET) as producer:
        await _go_on(producer, run, 2)


async def shared_append(run: Run, begin: Step, end: Step) -> None:
    """Two shared producers take turns on a partition (each checks the tail the other left, one rolls),
    then one writes a batch to both partitions."""
    options = {"flush": run.flush, "shared": True, **QUIET}
    async with (
        adiskq.Producer(run.path, partitions=2, segment_size_bytes=1024, **options) as a,  # type: ignore[arg-type]
        adiskq.Producer(run.path, **options) as b,  # type: ignore[arg-type]
    ):
        key = _key_for(0, 2)
        await _push_all(a, run, [b"s" * 300 + b"%d" % i for i in range(2)], key=key)
        run.setup.update(run.acked.values())
        begin()
        for i in range(3):
            await _push_all(b if i % 2 == 0 else a, run, [b"t" * 300 + b"%d" % i], key=key)
        await _push_many(b, run, [adiskq.Record(b"shared-%d" % i, key=f"k{i}") for i in range(6)])
        end()
        await _go_on(a, run, 2)


def _compressed(run: Run, **options: object) -> dict[str, object]:
    """A compressed stream's producer options (a given dictionary: no training), quiet, in the run's flush mode."""
    return {"compression": "zstd", "zstd_dictionary": trained_dictionary(), "flush": run.flush, **QUIET, **options}


async def compact_tags(run: Run, begin: Step, end: Step) -> None:
    """A compressed stream, whose segments have no .timeindex and a .tagindex only once a message has
    a tag: untagged pushes, then a tagged push and a tagged batch make the .tagindex, and the batch
    rolls the segment."""
    options = _compressed(run, segment_size_bytes=1024)
    values = [random.Random(number).randbytes(200) for number in range(9)]  # incompressible: the roll comes
    async with adiskq.Producer(run.path, **options) as producer:  # type: ignore[arg-type]
        await _push_all(producer, run, values[:2])
        run.setup.update(run.acked.values())
        begin()
        await _push_all(producer, run, values[2:4])
        run.attempted.add(values[4])
        try:
            run.ack(await producer.push(values[4], tag="paid"), values[4])
        except OSError as error:
            run.failures.append(error)
        await _push_many(producer, run, [adiskq.Record(value, tag="paid") for value in values[5:]])
        end()
        await _go_on(producer, run)


async def compact_shared(run: Run, begin: Step, end: Step) -> None:
    """Two shared producers on a compressed stream: one makes the .tagindex with a tagged push, and
    the other, which opened before it existed, finds it at its next turn and enters its pushes there."""
    options = _compressed(run, shared=True)
    async with (
        adiskq.Producer(run.path, **options) as a,  # type: ignore[arg-type]
        adiskq.Producer(run.path, **options) as b,  # type: ignore[arg-type]
    ):
        await _push_all(a, run, [b"untagged-0"])
        run.setup.update(run.acked.values())
        begin()
        run.attempted.add(b"tagged")
        try:
            run.ack(await b.push(b"tagged", tag="paid"), b"tagged")
        except OSError as error:
            run.failures.append(error)
        await _push_all(a, run, [b"untagged-1"])
        await _push_many(b, run, [adiskq.Record(b"many-%d" % i, tag="paid" if i % 2 else None) for i in range(4)])
        end()
        await _go_on(a, run)


async def delete_records(run: Run, begin: Step, end: Step) -> None:
    """Kafka's DeleteRecords as the gateway does it: the log start offset raised (stored durably
    beside the segments), then a vacuum of the segments wholly below it."""
    async with adiskq.Producer(run.path, segment_size_bytes=1024, flush=run.flush, **QUIET) as producer:  # type: ignore[arg-type]
        await _push_all(producer, run, [b"d" * 300 + b"%d" % i for i in range(8)])  # several segments
        run.setup.update(run.acked.values())
        directory = os.path.join(run.path, "parts", "000000")
        begin()
        try:
            await anyio.to_thread.run_sync(save_log_start, directory, 5)
            await producer.vacuum()
        except OSError as error:
            run.failures.append(error)
        end()
        await _go_on(producer, run)
    # What the log start hides is no longer expected.
    oldest = adiskq.stats(run.path).partitions[0].oldest_offset
    run.acked = {place: value for place, value in run.acked.items() if place[1] >= oldest}


async def _transaction(run: Run, begin: Step, end: Step, commit: bool) -> None:
    """A Kafka transaction as the gateway writes it: the records of producer 7, then the marker
    (durable whatever the flush mode). The coordinator's decision stands once the records are
    written, so a failed marker is written again once the fault clears, as the gateway's
    coordinator does; records whose write failed are ended with an abort marker. A committed
    transaction's records are acknowledged only once its marker returned; an aborted one's never."""
    async with adiskq.Producer(run.path, flush=run.flush, **QUIET) as producer:  # type: ignore[arg-type]
        await _push_all(producer, run, [b"setup"])
        run.setup.add(b"setup")
        values = [b"txn-%d" % i for i in range(3)]
        run.attempted.update(values)
        first: int | None = None
        ended = False
        begin()
        try:
            first = await partition_writes.write(
                producer, 0, [adiskq.Record(value, key=b"k") for value in values], transaction=(7, 0)
            )
            await partition_writes.write_marker(producer, 0, 7, 0, commit, 0)
            ended = True
        except OSError as error:  # PartialWriteError included: the records are then ended by an abort
            run.failures.append(error)
        end()
        decided = commit and first is not None
        if not ended:
            await partition_writes.write_marker(producer, 0, 7, 0, decided, 0)
        if decided:
            assert first is not None
            for i, value in enumerate(values):
                run.acked[(0, first + i)] = value
        await _go_on(producer, run)


async def transaction_commit(run: Run, begin: Step, end: Step) -> None:
    await _transaction(run, begin, end, commit=True)


async def transaction_abort(run: Run, begin: Step, end: Step) -> None:
    await _transaction(run, begin, end, commit=False)


WORKLOADS: dict[str, Workload] = {
    "push": push,
    "push_many-1p": push_many_one_partition,
    "push_many-3p": push_many_three_partitions,
    "roll": roll,
    "vacuum": vacuum,
    "close": close,
    "recovery": recovery_on_open,
    "check-repair": check_repair,
    "group-commit": group_commit,
    "spark-sink": spark_sink_commit,
    "spark-batch": spark_batch_write,
    "shared-append": shared_append,
    "compact-tags": compact_tags,
    "compact-shared": compact_shared,
    "delete-records": delete_records,
    "txn-commit": transaction_commit,
    "txn-abort": transaction_abort,
}
# Workloads that take a flush mode: each runs with both.
FLUSHED = (
    "push",
    "push_many-1p",
    "push_many-3p",
    "roll",
    "vacuum",
    "close",
    "shared-append",
    "compact-tags",
    "compact-shared",
    "delete-records",
    "txn-commit",
    "txn-abort",
)


def stream_messages(path: str) -> dict[tuple[int, int], bytes]:
    """Every message a reader can read now: (partition, offset) -> value (unreadable ones left out)."""
    found: dict[tuple[int, int], bytes] = {}
    try:
        partitions = adiskq.stats(path).partitions
    except (OSError, adiskq.Error):
        return found
    for stats in partitions:
        for offset in range(stats.oldest_offset, stats.next_offset):
            try:
                found[(stats.partition, offset)] = adiskq.read(path, stats.partition, offset).value
            except (OSError, adiskq.Error):
                continue
    return found


def oldest_offsets(path: str) -> dict[int, int]:
    """Each partition's oldest offset (what vacuum removed before it is gone on purpose)."""
    return {p.partition: p.oldest_offset for p in adiskq.stats(path).partitions}


def violations(
    run: Run,
    seen: dict[tuple[int, int], bytes],
    *,
    survived: dict[tuple[int, int], bytes],
    oldest: dict[int, int],
) -> list[str]:
    """What the stream after the run (``survived``) breaks of the promises: nothing acknowledged
    lost, nothing a reader saw taken back, nothing of a failed call beyond what readers saw."""
    problems = []
    for place, value in run.acked.items():
        if place[1] < oldest.get(place[0], 0):
            continue  # vacuumed on purpose
        if survived.get(place) != value:
            problems.append(f"acknowledged {place}={value!r} is {survived.get(place)!r} after reopening")
    for place, value in seen.items():
        if place in survived and survived[place] != value:
            problems.append(f"{place} was seen as {value!r}, then became {survived[place]!r}")
        elif place not in survived and place[1] >= oldest.get(place[0], 0):
            problems.append(f"{place}={value!r} was seen by a reader, then taken back")
    allowed = set(run.acked.values()) | set(seen.values()) | run.setup
    for place, value in survived.items():
        if value not in allowed and not run.exactly_once:
            problems.append(f"{place}={value!r} of a failed call is in the stream, though no reader saw it")
    if run.exactly_once:
        counts: dict[bytes, int] = {}
        for value in survived.values():
            counts[value] = counts.get(value, 0) + 1
        problems += [
            f"{value!r} is in the stream {counts.get(value, 0)} times, not once"
            for value in run.attempted
            if counts.get(value, 0) != 1
        ]
    return problems
