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

No task outlives the pushes: a producer never holds a task group open around its caller's code.
On Trio the pushing tasks do the work (a batch's first push leads it, in a shielded scope). On asyncio
a batch is led by a task of its own, created with the batch and done when it is: asyncio's own
``task.cancel()`` (``asyncio.timeout``, ``wait_for``) passes anyio's shields, and a leader it reached
in the middle of a commit cut the batch back under its followers' receipts, or, waiting for the
batch before, left its batch with no leader and every push that joined it waiting forever. Only its
batch holds that task, so nothing cancels it but the loop's own shutdown: before the commit its
pushes then get ``ClosedError``; during it, the commit's thread calls end first
(``EventLoop.run_in_thread``).

Once a push has joined a batch its wait cannot be cut short: on Trio it waits in
``wait_task_rescheduled`` with no way to abort, on asyncio it awaits a ``SteadfastFuture`` that
refuses to be cancelled (either costs less than a shielded cancel scope). A cancellation meanwhile is
delivered once the batch is finished: an anyio scope's at the caller's next checkpoint, after the push
returned its receipt, so a cancelled push has either been written with its offset or not at all;
asyncio's own at once, as the push ends (its message may then have been written).

A shared producer's lane appends only while it holds the partition's ``flock`` (after the producer's
turn, ``Turns`` in ``turns.py``), with its view of the partition brought up to date
(``PartitionWriter.refresh_quick``/``refresh``). It takes the lock for a run of writes, not for
each: inline writes take it without waiting, and so does a batch's leader. A batch whose leader
cannot take it at once is not written at all (``LockNotHeld``): its pushes wait for the lock
themselves (``Lane.take_lock``), before joining a new batch, so that wait — bounded by
``lock_timeout``, and ended by a cancellation like any other wait — never leaves a push half done.
Another writer that is stopped while it holds the lock makes them fail with ``LockTimeoutError``. At
each turn of the event loop (a callback scheduled when the lock was taken) the lane lets go if
another writer is queued for the lock (looked at from ``TURN_MIN_SECONDS`` after it took the lock,
at most every ``PROBE_SECONDS``), if the producer's turn is being handed over, or if it wrote
nothing in the last two turns, and keeps it otherwise; a batch looks the same way as soon as it is
committed. So a lone producer pushing in a loop keeps its locks (and pays next to nothing for
sharing), contending producers take turns of a few milliseconds, a batch's fsync in ``flush="sync"``
is within one hold, and an idle producer lets go within two turns of its loop: no lock outlives the
code that used it by more.
"""

from __future__ import annotations

import errno
import functools
import logging
import threading
import time
from collections.abc import Sequence
from typing import Final

import anyio
import anyio.to_thread

from .._errors import ClosedError, DiskUsageRefusedError, explain_os_error
from .._sansio import keyindex as keyindex_format
from .._sansio.entries import TAG_ENTRY_BYTES, EncodedRun, RecordRun, Run
from .._sansio.run_entries import run_records, run_timestamps
from .._storage.partition_writer import PartitionWriter
from .._storage.segment_writer import PartlyCommittedError, PendingBatch, SegmentWriter
from . import wakeup
from .batch import Batch
from .event_loop import EventLoop
from .lock_waits import take_lock
from .turns import PROBE_SECONDS, TURN_MIN_SECONDS, Turns
from .wakeup import anyone_waiting, waiters_of

__all__ = ["INLINE_MAX_BYTES", "Lane", "LockNotHeld", "explain_disk_error"]

logger: Final = logging.getLogger("adiskq.producer")

# Writes up to this size run on the event loop's thread (page-cache copies of well under a
# millisecond); larger batches are written from a worker thread so the loop never stalls on them.
INLINE_MAX_BYTES: Final = 256 * 1024


def explain_disk_error(error: OSError) -> OSError:
    """Add what it means for the stream, and what to do, to an OSError from the disk (in its
    message, so that logging ``str(error)`` keeps it)."""
    if getattr(error, "_adiskq_explained", False) or isinstance(error, DiskUsageRefusedError):
        return error  # a refusal's own message says all of that already
    error._adiskq_explained = True  # type: ignore[attr-defined]
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        explain_os_error(
            error,
            "adiskq: the disk is full. Nothing acknowledged was lost and the stream is consistent; "
            "free space (for example producer.vacuum() with a tighter Retention) and push again",
        )
    else:
        explain_os_error(
            error,
            "adiskq: this write failed and was cut back, so the stream is consistent and nothing "
            "acknowledged was lost; pushes succeed again once the cause is fixed",
        )
    return error


class LockNotHeld(Exception):
    """A shared producer's batch was not written: its leader could not take the partition's lock
    (or the producer's turn) without waiting. Its pushes wait for the lock and push again."""


# How many more turns of the loop, at most, a sync batch's leader waits for the last batch's
# followers to run and join it (one is enough on Trio; see Lane._lead).
_EXTRA_TURNS: Final = 2


def _gathered(run: Run) -> RecordRun:
    """A batch's own RecordRun, holding ``run``'s records, that later runs extend (``Lane.enqueue``)."""
    if type(run) is RecordRun:
        tags = run.tag_entries
        return RecordRun(
            list(run.records),
            list(run.timestamps),
            keyindex_format.unpack_hashes(run.key_hashes).tolist()
            if type(run.key_hashes) is bytes
            else list(run.key_hashes),
            None if tags is None else bytearray(tags),
            run.total,
        )
    assert type(run) is EncodedRun
    return RecordRun(
        run_records(run.data, run.index_entries),
        run_timestamps(run.time_entries),
        keyindex_format.unpack_hashes(run.key_hashes).tolist(),
        # b"": no record carries a tag, a 4-byte entry of zeros a record
        bytearray(run.tag_entries or bytes(run.record_count * TAG_ENTRY_BYTES)),
        run.total,
    )


def _extend(gathered: RecordRun, run: Run) -> None:
    """Add ``run``'s records to a batch's gathered run."""
    if type(run) is not RecordRun:
        run = _gathered(run)
    gathered.records.extend(run.records)
    gathered.timestamps.extend(run.timestamps)
    hashes = run.key_hashes
    gathered.key_hashes.extend(  # type: ignore[union-attr]  # a gathered run's are a list
        keyindex_format.unpack_hashes(hashes).tolist() if type(hashes) is bytes else hashes
    )
    tags = gathered.tag_entries
    if tags is not None:
        if run.tag_entries is None:
            gathered.tag_entries = None  # the segment takes them all from the records
        else:
            tags += run.tag_entries  # a gathered run's are a bytearray
    gathered.total += run.total


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
        loop: EventLoop,
        turns: Turns | None = None,
    ) -> None:
        self.partition = partition
        self.wake_key = wake_key
        self.sync_flush = sync_flush
        self.dirty = False  # written since the last fsync (read by the flusher thread)
        # The active segment's files closed, or being closed, by ``partition_writes.park`` (set
        # while ``parking`` is: writes wait for it, then open them again); a producer opened with
        # its partitions parked starts so.
        self.files_closed = partition.parked
        self.parking: anyio.Event | None = None
        self._structure_lock = structure_lock
        self._limiter = limiter
        self._open: Batch | None = None  # the batch new pushes join
        self._committing: Batch | None = None
        # Trio's followers of finished batches not run since they were woken (the next leader waits for them)
        self._waking = 0
        # The batches' waits, as the event loop has them (event_loop.EventLoop): on Trio,
        # trio.lowlevel for the followers' wait; on asyncio, how a batch gets its leading task and
        # the future its pushes wait for, and the cancellation that wait may meet.
        self._trio_lowlevel = loop.lowlevel
        self._reschedule = None if loop.lowlevel is None else loop.lowlevel.reschedule
        self._shield = loop.shield
        self._cannot_abort = loop.cannot_abort
        self._run_in_thread = loop.run_in_thread  # a blocking call, waited for whatever comes
        self._new_waiter = loop.new_batch_waiter
        self._start_task = loop.start_task
        self._asyncio_cancelled = loop.cancelled_errors
        # Whether the pushing task's anyio cancel scope is cancelled (the producer's check)
        self._cancel_pending = loop.cancel_pending
        # Shared producers: the partition's lock, how to run the release at the loop's next turn,
        # whether that release is scheduled, and whether the view is up to date under the lock.
        self._lock = partition.lock
        self._turns = turns
        self._release_due = False
        self._fresh = False
        self._wrote = False  # written since the last turn's look at the lock
        self._probe_at = 0.0  # when the partition lock's queue is next looked at (TURN_MIN_SECONDS after taking it)
        self._idle_looks = 0  # looks in a row that found nothing written
        # Whether the lane's own state lets a push write inline now: flush="async", an exclusive
        # producer (no partition lock), no batch open or committing. push tests it, then the
        # segment's room, and appends itself (a Python call less a push than try_write_one, which
        # tests the same). Kept by _note_batches wherever a batch opens or ends.
        self.inline = False
        self._note_batches()

    def _note_batches(self) -> None:
        """``inline`` again, after the open or committing batch changed."""
        self.inline = self._lock is None and not self._waits_for_a_batch()

    @property
    def idle(self) -> bool:
        """True when no batch is open or committing: nothing of this lane's is in flight."""
        return self._committing is None and self._open is None

    def _waits_for_a_batch(self) -> bool:
        """Whether records must join a batch whatever their size: flush="sync" (they wait for its
        fsync), or a batch open or committing (they may not overtake it)."""
        return self.sync_flush or self._committing is not None or self._open is not None

    # -- the partition's lock (shared producers) -------------------------------------------------

    @property
    def busy(self) -> bool:
        """True while the lane holds its partition's lock (a batch waiting for the turn does not:
        it waits for this producer's turn to go and come back)."""
        return self._lock is not None and self._lock.held

    def _take_now(self) -> bool:
        """Take the turn and the partition's lock if they are free and bring the view up to date
        cheaply; False when a batch must do it (a lock is busy, another producer rolled, a tail to
        repair)."""
        lock = self._lock
        assert lock is not None
        assert self._turns is not None
        try:
            if not lock.held:
                if not self._turns.try_take() or not lock.try_acquire():
                    return False
                self._took_lock()
                self._schedule_release()
            if not self.partition.refresh_quick():
                return False
        except OSError:
            return False  # a batch tries again, and reports the error to its pushes if it stays
        self._fresh = True
        return True

    @property
    def needs_lock(self) -> bool:
        """True when a push must wait for the partition's lock before it joins a batch."""
        lock = self._lock
        return lock is not None and not lock.held and self._committing is None

    async def take_lock(self) -> None:
        """Wait for the producer's turn and the partition's lock (each at most ``lock_timeout``:
        ``LockTimeoutError``); a cancellation ends the wait, and a lock taken as it came is let go
        at the loop's next look. Called by a push before it joins a batch: nothing is written yet."""
        lock = self._lock
        turns = self._turns
        assert lock is not None
        assert turns is not None
        try:
            while not lock.held:
                await turns.take()
                if lock.held:
                    break
                await take_lock(lock, turns.wait_seconds, turns.call_soon_threadsafe)
                self._took_lock()
        finally:
            self._schedule_release()

    async def _hold(self) -> bool:
        """Take the partition's lock if it is free now, with the view up to date; False if it is
        not (the batch is then not written: ``LockNotHeld``)."""
        lock = self._lock
        assert lock is not None
        assert self._turns is not None
        if not lock.held:
            if not self._turns.try_take() or not lock.try_acquire():
                return False
            self._took_lock()
        if not self._fresh:
            if not self.partition.refresh_quick():
                repairs = await anyio.to_thread.run_sync(self._refresh_locked, limiter=self._limiter)
                for repair in repairs:
                    logger.warning("adiskq: repaired what a producer that died left: %s", repair)
            self._fresh = True
        return True

    def _took_lock(self) -> None:
        # A writer queued for the lock waits for this holder's turn at least (the turn's own
        # hand-over runs on the same clock), so the queue is not looked at before.
        self._probe_at = time.monotonic() + TURN_MIN_SECONDS

    def _refresh_locked(self) -> list[object]:
        with self._structure_lock:
            return list(self.partition.refresh())

    def _schedule_release(self) -> None:
        if not self._release_due and self._turns is not None:
            self._release_due = True
            self._turns.add(self)

    def look_at_lock(self, yielding: bool) -> None:
        """At a turn of the loop: keep the lock while writing and nobody waits for it (nor for the
        producer's turn, ``yielding``), else let go."""
        self._release_due = False
        lock = self._lock
        if self._committing is not None or self._open is not None or lock is None or not lock.held:
            return  # a commit decides when it ends (a batch open now commits at the loop's next turn)
        if yielding:
            self.release()
            return
        now = time.monotonic()
        if now >= self._probe_at:
            self._probe_at = now + PROBE_SECONDS
            if lock.contended():
                self.release()
                return
        # Idle for two looks in a row, not one: Trio may run this callback twice between two
        # turns of a task that is pushing (it shuffles the tasks it runs in a batch).
        pushing = self._turns is not None and self._turns.pushing > 0
        self._idle_looks = 0 if self._wrote or pushing else self._idle_looks + 1
        self._wrote = False
        if self._idle_looks >= 2:
            self.release()
        else:
            self._schedule_release()

    def release(self) -> None:
        """Let go of the partition's lock (its buffered index entries written first). The lock is
        released even when this raises (``PartitionWriter.let_go``)."""
        self._fresh = False
        self._wrote = False
        self._idle_looks = 0
        self.partition.let_go()

    def release_quietly(self) -> None:
        """``release`` where raising would skip other releases (a look, closing): errors logged."""
        try:
            self.release()
        except Exception:
            logger.exception("adiskq: partition %d: letting go of its lock failed", self.partition_number)

    @property
    def partition_number(self) -> int:
        """The partition this lane writes."""
        return self.partition.partition

    # -- inline writes ---------------------------------------------------------------------------

    def may_write_inline(self) -> bool:
        """Whether records would be written inline now, their size and the lock aside: what push_many
        asks before it packs a batch for an inline write (one that then cannot go inline is encoded
        again, record by record)."""
        return not self._waits_for_a_batch() and not self.partition.needs_roll()

    def can_write_inline(self, size_bytes: int) -> bool:
        """True when records may be written right now, on the loop thread, keeping order."""
        if size_bytes > INLINE_MAX_BYTES or self._waits_for_a_batch():
            return False
        if self._lock is not None and not self._fresh and not self._take_now():
            return False
        return not self.partition.needs_roll()

    def try_write_one(self, record: bytes, timestamp_ns: int, key_hash: int, tag_entry: bytes | None = None) -> int:
        """Write and commit one record now if it may go inline; its offset, or -1 if it must be batched.

        The hot path of ``push``: the same tests as ``can_write_inline``, spelled out (a call less).
        (``push`` spells this out in turn while ``inline`` is set: keep the two alike.)
        """
        if self.sync_flush or self._committing is not None or self._open is not None:
            return -1
        if self._lock is not None and not self._fresh and not self._take_now():
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
        self._wrote = True
        if anyone_waiting and waiters_of(self.wake_key):  # no call while no consumer in this process waits
            wakeup.notify(self.wake_key)
        return offset

    def write_inline(self, run: Run) -> int:
        """Write and commit a run now, once ``can_write_inline(run.total)`` said it may; returns
        its first offset. Raises ``PartlyCommittedError`` when only its first records were
        committed (explained, as any disk error: ``explain_disk_error``)."""
        try:
            first = _append(self.partition.active, run)
        except PartlyCommittedError as error:
            self.dirty = True
            wakeup.notify(self.wake_key)
            raise explain_disk_error(error) from None
        except OSError as error:
            raise explain_disk_error(error) from None
        self.dirty = True
        self._wrote = True
        wakeup.notify(self.wake_key)
        return first

    # -- batches ---------------------------------------------------------------------------------

    def enqueue(self, run: Run) -> tuple[Batch, int]:
        """Join the open batch with a run of records; returns it and the run's first place in it.
        A run that opens a batch is written as it is, unless others join it (then the batch gathers
        them in a run of its own).

        The caller must then ``await complete(batch, ...)`` with no checkpoint in between.
        """
        batch = self._open
        if batch is None:
            batch = self._open = self._new_batch()
            self.inline = False  # pushes join this batch until it closes: none overtakes it
            batch.run = run
            return batch, 0
        gathered = batch.run
        assert gathered is not None
        if not batch.gathered:
            gathered = batch.run = _gathered(gathered)
            batch.gathered = True
        assert type(gathered) is RecordRun
        start = gathered.record_count
        _extend(gathered, run)
        return batch, start

    def _new_batch(self) -> Batch:
        new_waiter = self._new_waiter
        if new_waiter is None:
            return Batch(reschedule=self._reschedule)  # Trio: its first push leads it (complete)
        # asyncio: a task leads it, which nothing cancels (the module's docstring says why). It starts
        # at the loop's next turn, after the pushes already runnable had their chance to join.
        assert self._start_task is not None
        batch = Batch(new_waiter(), shield=self._shield)
        batch.leader = self._start_task(self._lead(batch))
        return batch

    async def complete(self, batch: Batch, last: int) -> int:
        """Wait for the batch (leading it, on Trio, if no push has yet); returns its first offset once
        the batch's records up to ``last`` (a place in it) are committed, or raises the batch's error."""
        waiter = batch.waiter
        if waiter is not None:
            # asyncio: the batch's task leads it; a cancellation waits for the batch to finish.
            try:
                await waiter
            except self._asyncio_cancelled:
                if not self._cancel_pending():
                    raise  # asyncio's own task.cancel(): it cannot be delivered again, so now
                # An anyio scope's: anyio delivers it again at the caller's next checkpoint, and
                # this push returns what became of its message. (Meanwhile anyio tries again at every
                # turn of the loop, as with any task deaf to its cancellation, so the loop does not
                # sleep until the batch is finished: an fdatasync's time, once a scope is cancelled.)
        elif batch.led:
            # A follower on Trio: Trio's own uninterruptible wait, deaf to cancellation as the
            # steadfast future is on asyncio. A cancel scope of its own (entered, exited, and every
            # scope around it walked on the way) cost a large share of a synchronous push's Python on
            # Trio (measured: see benchmarks/RESULTS.md, section "Figures the code relies on", F24).
            # A cancellation meanwhile is delivered at the caller's next checkpoint, after the push
            # returned its receipt. Written out here, not in a function: a coroutine frame less to
            # suspend and resume, per push.
            if not batch.finished:
                lowlevel = self._trio_lowlevel
                assert lowlevel is not None
                batch.followers.append(lowlevel.current_task())
                await lowlevel.wait_task_rescheduled(self._cannot_abort)
                self._waking -= 1  # this push has run: the next batch's leader need not wait for it
        else:
            with anyio.CancelScope(shield=True):  # Trio's leader: Trio cancels only through scopes
                batch.led = True
                await self._lead(batch)
        if batch.error is not None and last >= batch.committed:
            raise batch.error
        return batch.first_offset

    async def _lead(self, batch: Batch) -> None:
        """Close the batch, commit it and finish it, whatever happens: its pushes wait for it."""
        try:
            while self._committing is not None:
                await self._committing.wait()
            if self.sync_flush:
                # One turn of the loop before closing the batch, so every push already runnable joins
                # it (the pushers the last fsync released, most often): without it the first of them
                # would commit alone, and the batches would alternate between a few pushes and the
                # rest, twice the fsyncs for the same pushes. A turn costs microseconds; the fsync it
                # shares, hundreds. (A plain checkpoint: nothing cancels a leader, module docstring.)
                await anyio.lowlevel.checkpoint()
                # Trio runs a turn's tasks in an order it draws at random (reversed half the time, so
                # this leader often runs before the pushers it should wait for): a batch of one
                # record, and its own fsync, every other batch. So the leader waits one more turn if
                # some of the last batch's followers have not run yet (they have after it: Trio runs
                # every task that was runnable at a turn's start within that turn). Bounded, so it
                # can never spin.
                for _ in range(_EXTRA_TURNS):
                    if self._waking <= 0:
                        break
                    await anyio.lowlevel.checkpoint()
            if self._open is batch:
                self._open = None  # later pushes form the next batch
            self._committing = batch
            self.inline = False
            try:
                await self._commit(batch)
            finally:
                self._committing = None
                self._note_batches()
                self._after_commit()
        except BaseException as interruption:
            # Only the loop's shutdown cancels a leader (or an interrupt from a signal lands): its
            # pushes must not take the batch for written.
            if batch.error is None and batch.first_offset < 0:
                batch.error = ClosedError(
                    f"not written: this push's batch was interrupted ({type(interruption).__name__}) "
                    "before it was committed; the event loop is probably shutting down"
                )
            raise
        finally:
            if self._open is batch:
                self._open = None  # a batch left open would be joined, and never led
                self._note_batches()
            self._waking += len(batch.followers)  # finish() wakes them
            batch.finish()  # whatever happened to the locks: the batch's pushes must not wait on

    def _after_commit(self) -> None:
        """A shared producer's lane after a batch: let go of the partition's lock at once if another
        writer waits for it (or for the turn), else keep it until the next look. Any error lets go."""
        lock = self._lock
        turns = self._turns
        if lock is None or turns is None:
            return
        if not lock.held:
            turns.add(self)  # the turn may go
            return
        try:
            hand_over = lock.contended() or turns.yielding()
        except Exception:
            logger.exception("adiskq: partition %d: the look at its lock failed; letting go", self.partition_number)
            hand_over = True
        if hand_over:
            self.release_quietly()  # another writer is queued: it goes before our next batch
            turns.add(self)  # and the turn goes too, if no other lane holds a lock
        else:
            self._wrote = True
            self._schedule_release()

    async def drain(self) -> None:
        """Wait until every batched push is committed."""
        while True:
            batch = self._committing or self._open
            if batch is None:
                return
            await batch.wait()

    def _roll_locked(self) -> None:
        with self._structure_lock:
            self.partition.roll()

    async def _commit(self, batch: Batch) -> None:
        partition = self.partition
        try:
            if self._lock is not None:
                try:
                    held = await self._hold()
                except BaseException:
                    self._fresh = False
                    raise
                if not held:
                    self._fresh = False
                    batch.error = LockNotHeld()  # nothing written: its pushes wait for the lock
                    return
            if partition.needs_roll():
                await self._run_in_thread(self._roll_locked, self._limiter)
            writer = partition.active
            run = batch.run
            assert run is not None
            if self.sync_flush:
                await self._commit_durably(writer, batch, _write_data(writer, run))
            elif run.total > INLINE_MAX_BYTES:
                batch.first_offset = await self._run_in_thread(functools.partial(_append, writer, run), self._limiter)
            else:
                batch.first_offset = _append(writer, run)
            self.dirty = True
        except Exception as error:  # every push of the batch not committed gets the error
            if isinstance(error, OSError):
                explain_disk_error(error)
            count = 0 if batch.run is None else batch.run.record_count
            logger.warning("partition %d: a batch of %d failed: %s", partition.partition, count, error)
            batch.error = error
            if not isinstance(error, PartlyCommittedError):
                return
            batch.first_offset = error.first_offset
            batch.committed = error.committed
            self.dirty = True
        wakeup.notify(self.wake_key)

    async def _commit_durably(self, writer: SegmentWriter, batch: Batch, pending: PendingBatch) -> None:
        """The batch's data, written, made durable, and only then the index entries that publish it:
        no consumer may see a message a power cut could take back."""
        try:
            await self._run_in_thread(functools.partial(writer.sync, data_only=True), self._limiter)
        except BaseException:
            writer.abandon(pending)
            raise
        batch.first_offset = pending.first_offset
        writer.write_entries(pending)


def _columns(run: Run) -> tuple[list[bytes], list[int], Sequence[int] | bytes, bytes | None]:
    """A ``RecordRun``'s records, timestamps, key hashes and tag entries, as the segment's
    ``write_data`` and ``append`` take them."""
    assert type(run) is RecordRun
    tags = run.tag_entries
    return run.records, run.timestamps, run.key_hashes, None if tags is None else bytes(tags)


def _write_data(writer: SegmentWriter, run: Run) -> PendingBatch:
    """``run``'s records written to ``.data``, their entries pending (``SegmentWriter.write_data``)."""
    return writer.write_run(run) if type(run) is EncodedRun else writer.write_data(*_columns(run))


def _append(writer: SegmentWriter, run: Run) -> int:
    """``run`` appended and committed (``SegmentWriter.append``); its first offset."""
    return writer.append_run(run) if type(run) is EncodedRun else writer.append(*_columns(run))
