"""Idempotent producers: producer ids, and the sequence numbers that drop retried batches.

Kafka's rules (KIP-98): InitProducerId hands a producer an id and an epoch; every batch it sends
carries them and the sequence number of its first record, counted per partition from 0 (wrapping at
2**31). The broker keeps, per producer and partition, the last few batches it wrote. A batch equal
to one of them is a retry of a batch already written: it is answered with that batch's offset and
not written again. A batch whose first sequence is not the next one is refused with
OUT_OF_ORDER_SEQUENCE_NUMBER (the client then knows a batch is missing); an epoch older than the one
seen, with INVALID_PRODUCER_EPOCH. The table is in memory: producer ids start at the clock's
microseconds when the gateway starts, so an id from before a restart is never handed out again, and
its first batch after the restart starts its state afresh. A producer that has written nothing for a
day is forgotten the same way, as Kafka forgets it after ``producer.id.expiration.ms`` (a day): so
the table holds the producers of the last day, not every producer that ever wrote.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from typing import Final, NamedTuple

__all__ = ["Duplicate", "ProducerIds", "SequenceError", "Sequences"]

_KEPT_BATCHES: Final = 5  # Kafka's max.in.flight for idempotence: the retries a broker must recognise
_SEQUENCE_WRAP: Final = 2**31
_EXPIRE_AFTER_SECONDS: Final = 24 * 3600.0  # Kafka's producer.id.expiration.ms
_SWEEPS_PER_EXPIRY: Final = 24  # how often the table is swept for forgotten producers, per expiry


class Duplicate(NamedTuple):
    """A retry of a batch already written at ``base_offset``."""

    base_offset: int


class SequenceError(ValueError):
    """A batch refused: ``code`` is Kafka's error code (45 out of order, 47 old epoch)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


class _Written(NamedTuple):
    first_sequence: int
    last_sequence: int
    base_offset: int


class _State:
    __slots__ = ("batches", "epoch", "last_write")

    def __init__(self, epoch: int, now: float) -> None:
        self.epoch = epoch
        self.last_write = now
        self.batches: collections.deque[_Written] = collections.deque(maxlen=_KEPT_BATCHES)


class ProducerIds:
    """Hands out producer ids."""

    def __init__(self) -> None:
        self._next = time.time_ns() // 1000 % 2**62

    def new(self) -> int:
        """A producer id no producer has had from this gateway."""
        self._next += 1
        return self._next


class Sequences:
    """Per producer and partition: the epoch and the last batches written, for a day after the
    last (``expire_after`` seconds of ``clock``)."""

    def __init__(
        self, *, expire_after: float = _EXPIRE_AFTER_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._states: dict[tuple[str, int, int], _State] = {}
        self._expire_after = expire_after
        self._clock = clock
        self._next_sweep = clock() + expire_after / _SWEEPS_PER_EXPIRY

    def __len__(self) -> int:
        """How many (topic, partition, producer) states are kept."""
        return len(self._states)

    def check(
        self, topic: str, partition: int, producer_id: int, epoch: int, first: int, count: int
    ) -> Duplicate | None:
        """None when the batch is next and is to be written; a Duplicate to answer without writing;
        SequenceError when it is refused."""
        state = self._states.get((topic, partition, producer_id))
        if state is None:
            return None
        if epoch < state.epoch:
            raise SequenceError(
                f"producer {producer_id} epoch {epoch} is older than its current epoch {state.epoch}", 47
            )
        if epoch > state.epoch:
            if first != 0:
                raise SequenceError(f"producer {producer_id} began epoch {epoch} at sequence {first}, not 0", 45)
            return None
        last = (first + count - 1) % _SEQUENCE_WRAP
        for written in state.batches:
            if written.first_sequence == first and written.last_sequence == last:
                return Duplicate(written.base_offset)
        expected = (state.batches[-1].last_sequence + 1) % _SEQUENCE_WRAP if state.batches else 0
        if first != expected:
            raise SequenceError(
                f"producer {producer_id} sent sequence {first} to {topic}-{partition}; the next is {expected}", 45
            )
        return None

    def written(
        self, topic: str, partition: int, producer_id: int, epoch: int, first: int, count: int, base_offset: int
    ) -> None:
        """Remember a batch that was written at ``base_offset``."""
        key = (topic, partition, producer_id)
        now = self._clock()
        state = self._states.get(key)
        if state is None or state.epoch != epoch:
            state = self._states[key] = _State(epoch, now)
        state.last_write = now
        state.batches.append(_Written(first, (first + count - 1) % _SEQUENCE_WRAP, base_offset))
        if now >= self._next_sweep:
            self._forget_idle(now)

    def _forget_idle(self, now: float) -> None:
        """Drop the states of producers that wrote nothing for ``expire_after`` seconds."""
        oldest_kept = now - self._expire_after
        for key in [key for key, state in self._states.items() if state.last_write < oldest_kept]:
            del self._states[key]
        self._next_sweep = now + self._expire_after / _SWEEPS_PER_EXPIRY

    def forget_topic(self, topic: str) -> None:
        """Drop every state of a deleted topic."""
        for key in [key for key in self._states if key[0] == topic]:
            del self._states[key]
