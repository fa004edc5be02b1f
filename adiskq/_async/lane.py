"""One partition's write lane: pushes are written inline, or gathered into batches that commit together.

A push takes one of two roads:

* **inline** (``flush="async"``, lane idle, no roll due, a small write): the record is written on the
  event loop's thread at once — three page-cache ``write`` calls of a few microseconds, cheaper than
  any hand-off to a task or a thread. Nothing is queued ahead of it, so order is kept.
* **batched** (``flush="sync"``, or the lane is busy): the record joins the lane's open batch. The
  first push of a batch is its *leader*: it waits for the batch before to finish, closes its batch
  and commits it (roll if due, write, fdatasync in a worker thread, index entries); the other pushes
  of the batch just wait for it. Every push that arrives while a batch commits joins the next batch:
  that is the group commit — many pushes share one fsync, with no fixed linger to delay a lone push.

There is no background task: the pushing tasks do the work, so a producer never holds a task group
open around its caller's code. Once a push has joined a batch its wait is shielded from
cancellation (on Trio, a follower waits in ``wait_task_rescheduled`` with no way to abort, which costs
less than a shielded cancel scope), so a cancelled push has either been written with its offset or
not at all.
"""

from __future__ import annotations

import errno
import functools
import logging
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, NoReturn

import anyio
import anyio.to_thread

from .._storage.partition_writer import PartitionWriter
from .._storage.segment import PartlyCommittedError
from . import wakeup

if TYPE_CHECKING:
    import trio.lowlevel

__all__ = ["INLINE_MAX_BYTES", "Batch", "Lane", "explain_disk_error"]

logger: Final = logging.getLogger("adiskq.producer")

# Writes up to this size run on the event loop's thread (page-cache copies of well under a
# millisecond); larger batches are written from a worker thread so the loop never stalls on them.
INLINE_MAX_BYTES: Final = 256 * 1024


def explain_disk_error(error: OSError) -> OSError:
    """Add what it means for the stream, and what to do, to an OSError from the disk."""
    if getattr(error, "_adiskq_explained", False):
        return error
    error._adiskq_explained = True  # type: ignore[attr-defined]
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        error.add_note(
            "adiskq: the disk is full. Nothing acknowledged was lost and the stream is consistent; "
            "free space (for example producer.vacuum() with a tighter Retention) and push again."
        )
    else:
        error.add_note(
            "adiskq: this write failed and was cut back, so the stream is consistent and nothing "
            "acknowledged was lost; pushes succeed again once the cause is fixed."
        )
    return error


class Batch:
    """Pushes committed together: they share one write per file (and one fsync in sync mode)."""

    __slots__ = (
        "committed",
        "done",
        "error",
        "first_offset",
        "followers",
        "key_hashes",
        "led",
        "records",
        "tagindex",
        "timestamps",
    )

    def __init__(self) -> None:
        self.records: list[bytes] = []
        self.timestamps: list[int] = []
        self.key_hashes: list[int] = []  # for the key index: its hash of each record's key
        # The records' .tagindex entries as the pushes computed them; None once a push did not
        # (the segment then takes them from the records).
        self.tagindex: bytearray | None = bytearray()
        self.done = anyio.Event()
        self.first_offset = -1
        self.error: BaseException | None = None
        # With an error: how many of the batch's first records were committed all the same (an
        # index write that failed part-way keeps the entries readers could have seen).
        self.committed = 0
        self.led = False  # a push has taken the lead of this batch
        self.followers: list[trio.lowlevel.Task] = []  # Trio's pushes waiting for it (_follow_on_trio)

    def finish(self) -> None:
        """The batch is committed or failed: wake every push waiting for it."""
        self.done.set()
        if self.followers:
            import trio.lowlevel  # only Trio's pushes are followers (see Lane.complete)

            for task in self.followers:
                trio.lowlevel.reschedule(task)
            self.followers.clear()


class Lane:
    """The write lane of one partition."""

    def __init__(
        self,
        partition: PartitionWriter,
        wake_key: wakeup.PartitionKey,
        *,
        sync_flush: bool,
        structure_lock: threading.Lock,
        limiter: anyio.CapacityLimiter,
    ) -> None:
        self.partition = partition
        self.wake_key = wake_key
        self.sync_flush = sync_flush
        self.dirty = False  # written since the last fsync (read by the flusher thread)
        self._structure_lock = structure_lock
        self._limiter = limiter
        self._open: Batch | None = None  # the batch new pushes join
        self._committing: Batch | None = None
        self._on_trio = _running_on_trio()

    # -- inline writes ---------------------------------------------------------------------------

    def can_write_inline(self, size_bytes: int) -> bool:
        """True when records may be written right now, on the loop thread, keeping order."""
        return size_bytes <= INLINE_MAX_BYTES and not (
            self.sync_flush or self._committing is not None or self._open is not None or self.partition.needs_roll()
        )

    def try_write_one(self, record: bytes, timestamp_ns: int, key_hash: int, tag_entry: bytes | None = None) -> int:
        """Write and commit one record now if it may go inline; its offset, or -1 if it must be batched.

        The hot path of ``push``: the same tests as ``can_write_inline``, spelled out.
        """
        if self.sync_flush or self._committing is not None or self._open is not None:
            return -1
        writer = self.partition.active
        if writer.data_size >= self.partition.segment_size_bytes and writer.next_offset > writer.base_offset:
            return -1  # a roll is due: it fsyncs, so it happens in a batch, off the loop thread
        try:
            # OSError leaves the files as they were
            offset = writer.append_one(record, timestamp_ns, key_hash, tag_entry)
        except OSError as error:
            raise explain_disk_error(error) from None
        self.dirty = True
        wakeup.notify(self.wake_key)
        return offset

    def write_inline(
        self, records: list[bytes], timestamps: list[int], key_hashes: list[int], tagindex: bytes | None = None
    ) -> int:
        """Write and commit records now; returns the first offset.

        Raises ``PartlyCommittedError`` when only the first records were committed.
        """
        try:
            first = self.partition.active.append(records, timestamps, key_hashes, tagindex)
        except PartlyCommittedError as error:
            self.dirty = True
            wakeup.notify(self.wake_key)
            raise explain_disk_error(error) from None
        except OSError as error:
            raise explain_disk_error(error) from None
        self.dirty = True
        wakeup.notify(self.wake_key)
        return first

    # -- batches ---------------------------------------------------------------------------------

    def enqueue(
        self, records: list[bytes], timestamps: list[int], key_hashes: list[int], tagindex: bytes | None = None
    ) -> tuple[Batch, int]:
        """Join the open batch with a run of records (and their ``.tagindex`` entries, if the caller
        has them); returns it and the run's place in it.

        The caller must then ``await complete(batch)`` with no checkpoint in between.
        """
        batch = self._open
        if batch is None:
            batch = self._open = Batch()
        start = len(batch.records)
        batch.records.extend(records)
        batch.timestamps.extend(timestamps)
        batch.key_hashes.extend(key_hashes)
        if batch.tagindex is not None:
            if tagindex is None:
                batch.tagindex = None
            else:
                batch.tagindex += tagindex
        return batch, start

    async def complete(self, batch: Batch, last: int) -> int:
        """Lead or wait for the batch; returns its first offset once the batch's records up to
        ``last`` (a place in it) are committed, or raises the batch's error."""
        if batch.led and self._on_trio:
            await _follow_on_trio(batch)
        else:
            with anyio.CancelScope(shield=True):
                if batch.led:
                    await batch.done.wait()
                else:
                    batch.led = True
                    await self._lead(batch)
        if batch.error is not None and last >= batch.committed:
            raise batch.error
        return batch.first_offset

    async def _lead(self, batch: Batch) -> None:
        while self._committing is not None:
            await self._committing.done.wait()
        if self.sync_flush:
            # One turn of the loop before closing the batch, so every push already runnable joins it
            # (the pushers the last fsync released, most often): without it the first of them would
            # commit alone, and the batches would alternate between a few pushes and the rest, twice
            # the fsyncs for the same pushes. A turn costs microseconds; the fsync it shares, hundreds.
            await anyio.lowlevel.cancel_shielded_checkpoint()
        if self._open is batch:
            self._open = None  # later pushes form the next batch
        self._committing = batch
        try:
            await self._commit(batch)
        finally:
            self._committing = None
            batch.finish()

    async def drain(self) -> None:
        """Wait until every batched push is committed."""
        while True:
            batch = self._committing or self._open
            if batch is None:
                return
            await batch.done.wait()

    def _roll_locked(self) -> None:
        with self._structure_lock:
            self.partition.roll()

    async def _commit(self, batch: Batch) -> None:
        partition = self.partition
        try:
            if partition.needs_roll():
                await anyio.to_thread.run_sync(self._roll_locked, limiter=self._limiter)
            writer = partition.active
            tagindex = None if batch.tagindex is None else bytes(batch.tagindex)
            if self.sync_flush:
                # Data first, made durable, and only then the index entries that publish it: no
                # consumer may see a message a power cut could take back.
                pending = writer.write_data(batch.records, batch.timestamps, batch.key_hashes, tagindex)
                try:
                    await anyio.to_thread.run_sync(
                        functools.partial(writer.sync, data_only=True), limiter=self._limiter
                    )
                except BaseException:
                    writer.abandon(pending)
                    raise
                batch.first_offset = pending.first_offset
                writer.write_entries(pending)
            elif sum(map(len, batch.records)) > INLINE_MAX_BYTES:
                batch.first_offset = await anyio.to_thread.run_sync(
                    writer.append, batch.records, batch.timestamps, batch.key_hashes, tagindex, limiter=self._limiter
                )
            else:
                batch.first_offset = writer.append(batch.records, batch.timestamps, batch.key_hashes, tagindex)
            self.dirty = True
        except Exception as error:  # every push of the batch not committed gets the error
            if isinstance(error, OSError):
                explain_disk_error(error)
            logger.warning("partition %d: a batch of %d failed: %s", partition.partition, len(batch.records), error)
            batch.error = error
            if not isinstance(error, PartlyCommittedError):
                return
            batch.first_offset = error.first_offset
            batch.committed = error.committed
            self.dirty = True
        wakeup.notify(self.wake_key)


def _running_on_trio() -> bool:
    """Whether this runs in Trio's event loop (not asyncio's, nor outside any loop)."""
    trio = sys.modules.get("trio")  # never imported: not Trio (and Trio stays an optional extra)
    if trio is None:
        return False
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        return False
    return True


async def _follow_on_trio(batch: Batch) -> None:
    """Wait for a batch another push leads, deaf to cancellation, as the shielded wait is on asyncio.

    Trio's own uninterruptible wait: a cancel scope of its own (entered, exited, and every scope
    around it walked on the way) cost a quarter of a synchronous push's Python on Trio. A cancellation
    meanwhile is delivered at the caller's next checkpoint, after the push returned its receipt.
    """
    import trio.lowlevel

    if batch.done.is_set():
        return
    batch.followers.append(trio.lowlevel.current_task())
    await trio.lowlevel.wait_task_rescheduled(_cannot_abort)


def _cannot_abort(raise_cancel: Callable[[], NoReturn]) -> trio.lowlevel.Abort:
    import trio.lowlevel

    return trio.lowlevel.Abort.FAILED
