"""A named group's commit bookkeeping: where each held partition began, what is stored, what waits.

No I/O and no waiting: ``ConsumerGroup`` asks it what to store, stores that (in a worker thread,
under its store lock), and tells it what was stored.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

__all__ = ["CommitLedger"]


class CommitLedger:
    """Commits of the partitions one member holds, stored every ``interval`` seconds."""

    __slots__ = ("_committed", "_held_below", "_last_store", "_pending", "_starts", "_wanted", "interval")

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._starts: dict[int, int] = {}  # where this member began each partition it holds
        self._committed: dict[int, int] = {}  # stored on disk (as far as this member knows)
        self._pending: dict[int, int] = {}  # committed in memory, not stored yet
        # Partition -> offset its commit may not pass: a message there could not be stored where it
        # had to go (a dead letter, a retry), so it must be read again unless a later try succeeds.
        self._held_below: dict[int, set[int]] = {}
        self._wanted: dict[int, int] = {}  # the commits asked for while held below (made once let go)
        self._last_store = time.monotonic()

    def began(self, partition: int, position: int, stored: int | None) -> None:
        """This member reads ``partition`` from ``position``; ``stored`` is its commit on disk."""
        self._starts[partition] = position
        if stored is None:
            self._committed.pop(partition, None)
        else:
            self._committed[partition] = stored

    def forget(self, partition: int) -> None:
        """The partition went to another member (its commits were stored first)."""
        self._pending.pop(partition, None)
        self._committed.pop(partition, None)
        self._starts.pop(partition, None)
        self._held_below.pop(partition, None)
        self._wanted.pop(partition, None)

    def commit(self, partition: int, next_offset: int) -> None:
        """Messages before ``next_offset`` are processed (a lower commit than one made changes nothing)."""
        held = self.held_below(partition)
        if held is not None and next_offset > held:
            self._wanted[partition] = max(next_offset, self._wanted.get(partition, next_offset))
            next_offset = held
        if next_offset > self._pending.get(partition, self._committed.get(partition, -1)):
            self._pending[partition] = next_offset

    def hold_below(self, partition: int, offset: int) -> None:
        """Keep the partition's commit at or below ``offset`` until ``let_go(partition, offset)``
        (the message there was not processed: it must be delivered again if this member stops)."""
        self._held_below.setdefault(partition, set()).add(offset)

    def let_go(self, partition: int, offset: int) -> None:
        """The message at ``offset`` is processed after all: its hold ends, and the commits made
        meanwhile apply up to the next hold, if any."""
        held = self._held_below.get(partition)
        if held is None or offset not in held:
            return
        held.discard(offset)
        if not held:
            del self._held_below[partition]
        wanted = self._wanted.pop(partition, None)
        if wanted is not None:
            self.commit(partition, wanted)

    def held_below(self, partition: int) -> int | None:
        """The offset the partition's commit may not pass now, or None."""
        held = self._held_below.get(partition)
        return min(held) if held else None

    def touch(self, partition: int) -> None:
        """Have the partition stored at the next store even if its commit did not move (something
        stored beside it changed)."""
        if partition in self._pending:
            return
        current = self._committed.get(partition, self._starts.get(partition))
        if current is not None:
            self._pending[partition] = current

    @property
    def committed(self) -> dict[int, int]:
        """Partition -> next offset, as committed (stored or still pending)."""
        return {**self._committed, **self._pending}

    @property
    def pending(self) -> list[int]:
        """The partitions with commits not stored yet."""
        return list(self._pending)

    def to_store(self, partitions: Iterable[int], *, carry_starts: bool) -> dict[int, int]:
        """The offsets to store for these partitions: their pending commits, and with
        ``carry_starts`` where this member began those that have no commit at all (so ``start=``
        is resolved once for the group, not again by each member that takes a partition over)."""
        partitions = list(partitions)
        offsets = {p: self._pending[p] for p in partitions if p in self._pending}
        if carry_starts:
            for partition in partitions:
                if partition not in offsets and partition not in self._committed and partition in self._starts:
                    offsets[partition] = self._starts[partition]
        return offsets

    def stored(self, offsets: dict[int, int]) -> None:
        """These offsets are on disk now; a commit made meanwhile stays pending."""
        self._committed.update(offsets)
        for partition, offset in offsets.items():
            if self._pending.get(partition) == offset:
                del self._pending[partition]
        self._last_store = time.monotonic()

    def postpone(self) -> None:
        """A store could not be made now (another member holds the lock): try again in ``interval``."""
        self._last_store = time.monotonic()

    def store_due_in(self) -> float | None:
        """Seconds until the pending commits should be stored (<= 0: now), or None if none wait."""
        if not self._pending:
            return None
        return self._last_store + self.interval - time.monotonic()
