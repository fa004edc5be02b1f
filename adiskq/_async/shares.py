"""The one road a write takes below ``Producer``: each partition's *share* of a call, one run.

Whatever is written — push_many's batch, a push that waits for a batch, a Kafka Produce's batch
(``partition_writes.py``), a transaction's marker — reaches ``.data`` the same way here:

1. the records are split into one *share* per partition they go to, each a *run*
   (``entries.Run``: an ``EncodedRun``, its entries made ahead, or a ``RecordRun``, the records as
   a list whose entries the segment makes where it writes them; a single record is a run of one);
2. the disk guard admits the call's bytes once, before any is written;
3. each share is written *inline* (``Lane.write_inline``: on the loop's thread, now) when its lane
   can take it now, else *queued* (``Lane.enqueue``) in the lane's batch;
4. every queued share is led to its end (``Lane.complete``), even after another share failed: a
   share left queued would never be led, so closing would wait for it forever and a later push to
   that partition would commit it behind this call's back;
5. a share whose batch went unwritten because a shared producer lost the partition's lock
   (``LockNotHeld``) waits for the lock and is queued again;
6. the answer: where each share went (its records' places in the call, its partition, its first
   offset), from which the caller builds its receipts — or the failure: raised as it is when nothing
   was written, else as ``PartialWriteError`` with the receipts of what was (``_raise_failure``, the
   one place a partly committed write becomes the user's error).

``push`` writes its record inline itself (its measured branch, held to this path by
``tests/storage/test_hot_path_twins.py``) and comes here only to wait for a batch. A large call over
several partitions lets other tasks run between its shares' writes (each share still gets contiguous
offsets); closing waits for such a call to end (``Producer._splitting``). This module is one of the
producer's own: with ``producer.py`` and ``partition_writes.py`` it alone reaches its private state.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Final, NamedTuple, NoReturn

import anyio
import anyio.lowlevel

from .._errors import InvalidArgumentError, PartialWriteError
from .._sansio import keyindex
from .._sansio.core import COMPILED, pack_records, receipts
from .._sansio.entries import EncodedRun, RecordRun, Run
from .._sansio.transactions import transactional_record
from .._sansio.values import Receipt, Record
from .._storage.segment_writer import PartlyCommittedError
from .lane import INLINE_MAX_BYTES, LockNotHeld

if TYPE_CHECKING:
    from .batch import Batch
    from .producer import Producer

__all__ = ["encode_records", "inline_lane_free", "push_many", "write_run", "write_run_now"]

# push_many encodes this many records between yields, so a big batch never stalls the loop for long.
_ENCODE_CHUNK: Final = 256
# The compiled core encodes a record in far less time, so its chunks are larger for the same time on
# the loop (measured: see benchmarks/RESULTS.md, section "Figures the code relies on", F21).
_COMPILED_ENCODE_CHUNK: Final = 4096

# The key index's hash, which the compiled core computes itself (zlib's CRC-32); where a test has
# replaced keyindex.key_hash, the batch is encoded record by record, which calls the replacement.
_CRC32: Final = zlib.crc32


class _Share(NamedTuple):
    """One partition's share of a call: its records' places in the call, the partition, its run."""

    positions: Sequence[int]
    partition: int
    run: Run


# Where a share went: its records' places in the call, its partition, its first offset.
_Written = tuple[Sequence[int], int, int]


def _place_receipts(placed: list[Receipt | None], positions: Sequence[int], partition: int, first: int) -> None:
    """Fill in the receipts of one partition's share (made by the core: this runs per record)."""
    made = receipts(partition, first, len(positions))
    if isinstance(positions, range) and len(positions) == len(placed):
        placed[:] = made
    else:
        for position, receipt in zip(positions, made, strict=True):
            placed[position] = receipt


def _raise_failure(failure: BaseException, written: list[_Written], count: int) -> NoReturn:
    """The failure of a call of ``count`` records: as it is when nothing was written (the call
    failed whole), else ``PartialWriteError`` with a receipt for each record written and None for
    the rest. The one place a partly committed write becomes the user's error."""
    if not written:
        raise failure
    placed: list[Receipt | None] = [None] * count
    for positions, partition, first in written:
        _place_receipts(placed, positions, partition, first)
    raise PartialWriteError(failure, placed) from failure


# -- push_many -------------------------------------------------------------------------------------


async def push_many(producer: Producer[str | bytes, bytes], records: Iterable[object]) -> list[Receipt]:
    """``Producer.push_many``'s work: the records checked and encoded (in chunks, letting other
    tasks run between them, while nothing is written), split into shares and written."""
    if producer._cancel_pending():
        await anyio.lowlevel.checkpoint_if_cancelled()
    if producer._state != "open":
        producer._check_open()
    # Records and bytes, as stored (a producer with serializers passes their output); the
    # encoder checks each item's type.
    items: list[Record | bytes] = list(records)  # type: ignore[arg-type]
    if not producer._holds_tags and any(isinstance(item, Record) and item.tag is not None for item in items):
        producer._refuse_tags()
    producer._check_headers(items)
    if not items:
        await producer._shielded_turn()
        return []
    compression = producer._compression
    if compression is not None and compression.wants_dictionary:
        # A stream's first large batch trains its dictionary and is stored compressed with it.
        values = (item.value if isinstance(item, Record) else item for item in items)
        await compression.train_before([value for value in values if isinstance(value, bytes)])
        producer._check_open()
    now = time.time_ns()
    count = len(items)
    large = count > _ENCODE_CHUNK
    chunk = _COMPILED_ENCODE_CHUNK if COMPILED else _ENCODE_CHUNK
    if large:
        # Encoding a large batch is CPU work on the loop thread: let other tasks run before each
        # chunk (and the caller's own work before this call ends a step of its own). Nothing is
        # written yet, so a cancellation here leaves no trace.
        await _turn_before_writing(producer)
    if (
        producer._partition_count == 1
        and compression is None
        and count <= chunk
        and producer._lanes[0].may_write_inline()
        and keyindex.key_hash is _CRC32
    ):
        # One partition, values stored as they are, a write that would go inline (no fsync to wait
        # for, no batch in flight, no roll due): the batch packed in one buffer with its entries
        # (None where it is too large to write inline or not plain; then encoded below).
        packed = pack_records(items, now, INLINE_MAX_BYTES, producer._keyless)
        if packed is not None:
            if packed.largest > producer._max_message_bytes:
                producer._check_size(packed.largest)
            if large:
                await _turn_before_writing(producer)  # the write is the next long step; still nothing written
            producer._check_open()
            (_, _, first), *_ = await _write(producer, [_Share(range(count), 0, packed)], count, packed.total)
            made: list[Receipt] = receipts(0, first, count)
            return made
    encoder = producer._encoder
    first_chunk = items if count <= chunk else items[:chunk]  # no copy of a batch of one chunk
    encoded, stamps, partitions, key_hashes, entries, total_bytes = encoder.encode_sized(first_chunk, now)
    for start in range(chunk, count, chunk):
        await _turn_before_writing(producer)
        more_encoded, more_stamps, more_partitions, more_hashes, more_entries, more_bytes = encoder.encode_sized(
            items[start : start + chunk], now
        )
        encoded += more_encoded
        stamps += more_stamps
        partitions += more_partitions
        key_hashes.extend(more_hashes)  # an array("I") from the compiled core, a list from the Python path
        entries = None if entries is None or more_entries is None else entries + more_entries
        total_bytes += more_bytes
    if large:
        await _turn_before_writing(producer)  # the writes are the next long step; still nothing written
    producer._check_open()
    if compression is not None and compression.wants_training:
        await compression.train()
        producer._check_open()
    # One share? (A set of the partitions is cheap, but not free: measured, see benchmarks/RESULTS.md,
    # section "Figures the code relies on", F22.)
    if producer._partition_count == 1 or len(set(partitions)) == 1:
        tags = None if entries is None else b"".join(entries)
        run = RecordRun(encoded, stamps, key_hashes, tags, total_bytes)
        share = _Share(range(count), partitions[0], run)
        (_, partition, first), *_ = await _write(producer, [share], count, total_bytes)
        made = receipts(partition, first, count)
        return made
    by_partition: dict[int, list[int]] = {}
    for position, partition in enumerate(partitions):
        places = by_partition.get(partition)
        if places is None:
            by_partition[partition] = [position]
        else:
            places.append(position)
    written = await _write(
        producer,
        _shares(by_partition, encoded, stamps, key_hashes, entries),
        count,
        total_bytes,
        split=large,
    )
    placed: list[Receipt | None] = [None] * count
    for positions, partition, first in written:
        _place_receipts(placed, positions, partition, first)
    return placed  # type: ignore[return-value]  # every entry is set when nothing failed


def _shares(
    by_partition: dict[int, list[int]],
    encoded: list[bytes],
    stamps: list[int],
    key_hashes: Sequence[int],
    entries: list[bytes] | None,
) -> Iterator[_Share]:
    """Each partition's share of a batch, made as it is written (a large batch's shares are written
    one a step, so making them is spread over those steps too)."""
    for partition, positions in by_partition.items():
        records = [encoded[i] for i in positions]
        run = RecordRun(
            records,
            [stamps[i] for i in positions],
            [key_hashes[i] for i in positions],
            None if entries is None else b"".join([entries[i] for i in positions]),
            sum(map(len, records)),
        )
        yield _Share(positions, partition, run)


async def _turn_before_writing(producer: Producer[str | bytes, bytes]) -> None:
    """``anyio.lowlevel.checkpoint()`` for a call that has written nothing yet, at the cost of
    the loop's turn alone (anyio's checkpoint costs more on asyncio,
    measured: see benchmarks/RESULTS.md, section "Figures the code relies on", F23): a cancellation
    waiting is raised, then other tasks run once (a cancellation the turn delivers, asyncio's,
    leaves nothing written either)."""
    if producer._cancel_pending():
        await anyio.lowlevel.checkpoint_if_cancelled()
    await producer._loop_turn()


# -- one partition's run ---------------------------------------------------------------------------


def encode_records(producer: Producer[str | bytes, bytes], records: list[Record], field: bytes | None = None) -> Run:
    """Records to one partition, encoded as any push's (compressed on a stream that compresses):
    a run of their own whatever their keys. With ``field`` (``transactions.producer_field``), each
    made a record of that Kafka producer's open transaction."""
    producer._check_headers(records)
    encoded, stamps, _, key_hashes, entries, total = producer._encoder.encode_sized(list(records), time.time_ns())
    if field is not None and encoded:
        encoded = [transactional_record(record, field) for record in encoded]
        producer._check_size(max(map(len, encoded)))
        total = sum(map(len, encoded))
    return RecordRun(encoded, stamps, key_hashes, None if entries is None else b"".join(entries), total)


def _check_run(producer: Producer[str | bytes, bytes], run: Run) -> None:
    """An ``EncodedRun`` made outside the producer (a Kafka Produce's batch) may be stored as it
    is: not on a stream that compresses its values, no record over ``max_message_bytes``."""
    if type(run) is EncodedRun:
        if not producer._takes_encoded:
            raise InvalidArgumentError(f"stream {producer.path!r} compresses its values: push Records to it")
        if run.largest > producer._max_message_bytes:
            producer._check_size(run.largest)


async def write_run(producer: Producer[str | bytes, bytes], partition: int, run: Run) -> int:
    """``run`` written to ``partition`` whatever its records' keys, whole or not at all; the first
    record's offset (the rest follow it), -1 for no records. For writers that choose the partition
    themselves (a Kafka client, through ``partition_writes.py``). Raises what push_many raises;
    ``PartialWriteError`` (with its receipts) when only its first records were committed."""
    turns = producer._turns
    if turns is not None:
        turns.pushing += 1
    try:
        if producer._cancel_pending():
            await anyio.lowlevel.checkpoint_if_cancelled()
        producer._check_partition(partition)
        count = run.record_count
        if not count:
            await anyio.lowlevel.cancel_shielded_checkpoint()
            return -1
        _check_run(producer, run)
        (_, _, first), *_ = await _write(producer, [_Share(range(count), partition, run)], count, run.total)
        return first
    finally:
        if turns is not None:
            turns.pushing -= 1


def inline_lane_free(producer: Producer[str | bytes, bytes], partition: int) -> bool:
    """Whether ``partition``'s writes may be answered without awaiting: not on a stream flushed
    with fsync (answered after the fsync, which is a batch's, off the loop thread)."""
    producer._check_partition(partition)
    return not producer._lanes[partition].sync_flush


def write_run_now(producer: Producer[str | bytes, bytes], partition: int, run: Run) -> int | None:
    """``write_run`` without awaiting: the first record's offset (-1 for no records) once written
    and committed now, on the loop thread, when the partition's lane may take it inline
    (``flush="async"``, no batch in flight, no roll due, the lock at hand); None when it must wait,
    and then nothing was written or counted. For a server answering from its socket callbacks (the
    Kafka gateway), which has no turn of the loop to give before its answer."""
    if not inline_lane_free(producer, partition):
        return None
    count = run.record_count
    if not count:
        return -1
    _check_run(producer, run)
    lane = producer._lanes[partition]
    if not lane.can_write_inline(run.total):
        return None
    guard = producer._disk_guard
    if guard is not None:
        guard.admit(run.total)
    try:
        return lane.write_inline(run)
    except PartlyCommittedError as error:
        _raise_failure(error, [(range(error.committed), partition, error.first_offset)], count)


# -- the shares' writes ----------------------------------------------------------------------------


async def _write(
    producer: Producer[str | bytes, bytes], shares: Iterable[_Share], count: int, total: int, *, split: bool = False
) -> list[_Written]:
    """Write each share of a call of ``count`` records and ``total`` bytes (steps 2 to 6 of the
    module's docstring); where each went. ``split``: the shares are several and the call large, so
    other tasks run between their writes."""
    guard = producer._disk_guard
    if guard is not None:
        guard.admit(total)  # the whole call, before any of it is written
    lanes = producer._lanes
    written: list[_Written] = []
    waiting: list[tuple[_Share, Batch, int]] = []
    failure: BaseException | None = None
    producer._splitting += split  # closing waits for it: no share is written to a closed file
    try:
        for share in shares:
            if split and written and not waiting:  # a queued share is led before any yield
                # Shielded: some shares are written, so this call must finish.
                await producer._shielded_turn()
            lane = lanes[share.partition]
            run = share.run
            if lane.can_write_inline(run.total):
                try:
                    first = lane.write_inline(run)
                except OSError as error:
                    failure = error  # the shares after this one are not written at all
                    if isinstance(error, PartlyCommittedError) and error.committed:  # its first records were kept
                        written.append((share.positions[: error.committed], share.partition, error.first_offset))
                    break
                written.append((share.positions, share.partition, first))
            else:
                batch, start = lane.enqueue(run)
                waiting.append((share, batch, start))
    finally:
        producer._splitting -= split
        if split and not producer._splitting and producer._splits_done is not None:
            producer._splits_done.set()
    if not waiting and failure is None:
        # Written: other tasks get a turn before the receipts are built (a step of its own for a
        # large call). Shielded: a call that wrote must return.
        await producer._shielded_turn()
    not_held: list[_Share] = []
    for share, batch, start in waiting:
        lane = lanes[share.partition]
        try:
            first = await lane.complete(batch, start + len(share.positions) - 1)
        except LockNotHeld:
            not_held.append(share)
            continue
        except Exception as error:
            failure = failure or error
            _note_kept(written, share, batch, start)
            continue
        written.append((share.positions, share.partition, first + start))
    for share in not_held:
        if failure is None:
            failure = await _write_again(producer, share, written)
    if failure is not None:
        _raise_failure(failure, written, count)
    if count > _ENCODE_CHUNK:
        await producer._shielded_turn()  # and the caller's next step is its own (shielded: written)
    return written


def _note_kept(written: list[_Written], share: _Share, batch: Batch, start: int) -> None:
    """The first records of a share that a failed index write kept (cut in two), if any."""
    kept = batch.committed - start
    if kept > 0:
        written.append((share.positions[:kept], share.partition, batch.first_offset + start))


async def _write_again(
    producer: Producer[str | bytes, bytes], share: _Share, written: list[_Written]
) -> BaseException | None:
    """Write a share whose batch went unwritten for want of the partition's lock, adding what was
    written to ``written``; the failure, if any. Nothing of it is written yet, so the wait for the
    lock is cancellable while nothing of the call is either; shielded once something is (and still
    bounded by ``lock_timeout``), so the call ends whole or partial."""
    lane = producer._lanes[share.partition]
    last = len(share.positions) - 1
    with anyio.CancelScope(shield=bool(written)):
        while True:
            try:
                if lane.needs_lock:
                    await producer._take_lock(lane)
                batch, start = lane.enqueue(share.run)
            except Exception as error:
                return error
            try:
                first = await lane.complete(batch, start + last)
            except LockNotHeld:
                continue
            except Exception as error:
                _note_kept(written, share, batch, start)
                return error
            written.append((share.positions, share.partition, first + start))
            return None
    return None  # not reached: the scope is never cancelled itself
