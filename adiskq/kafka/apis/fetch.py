"""Fetch (key 1): records from each partition asked for, after a long poll when there are too few.

Records are what the library's own readers may see; each partition's messages go back as one
uncompressed record batch (v2) per read. With fewer than ``min_bytes`` at hand, the request waits
for the stream's own wake-ups (``_fetching.py``) up to ``max_wait_ms``, then answers with what
there is. Limits follow Kafka (KIP-74): ``partition_max_bytes`` per partition and ``max_bytes``
for the response, except that the response's first record batch (of its first partition with
data) is returned whatever its size, so a consumer never stalls on a large message; every other
batch fits the limits (librdkafka sizes its receive buffer from ``max_bytes`` and drops a larger
response). Incremental fetch sessions (KIP-227) are not kept: every response has session id 0,
which tells the client to send full requests. From version 13 on, topics are named by their ids
(``_topic_ids.py``); an id no topic has is answered with UNKNOWN_TOPIC_ID.

A request is read by one compiled call (``kafka_fetch_request``: the fields used here, no kio
dataclass a topic and partition) and answered by another (``kafka_fetch_answer``: the whole frame).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, NamedTuple, cast

from kio.schema.errors import ErrorCode

from ..._async.asyncio_deadlines import AsyncioDeadline
from ..._async.follower import PartitionFollower
from ..._errors import OffsetOutOfRangeError
from .._fetching import MAX_STORED_RECORDS, read_batch
from .._registry import Later, RequestContext, ResponseFrame, answers_now, register
from .._topic_ids import TopicIds
from .._topics import check_topic_name
from .._transactional_fetch import aborted_among
from .._transactions import transactions_of
from ..wire.fetch_answer import fetch_answer, fetch_answer_with_transactions
from ..wire.fetch_request import FETCH_REQUEST_VERSIONS, fetch_request
from ..wire.protocol import FastReader, add_fast_reader
from ._common import error_code_for

if TYPE_CHECKING:
    import asyncio

__all__ = ["fetch"]

_NO_LIMIT: Final = 2**31 - 1
_TOPIC_IDS_FROM: Final = 13  # the first version that names topics by id
_MILLISECOND: Final = dt.timedelta(milliseconds=1)
_READ_COMMITTED: Final = 1


class FetchAsked(NamedTuple):
    """What a Fetch request asks for (the fields the gateway uses; ``kafka_fetch_request``'s)."""

    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int  # 1: read_committed (never past the last stable offset, with aborted transactions)
    # (topic, [(partition, fetch_offset, partition_max_bytes)]); a topic by name, or by its id's
    # 16 bytes from version 13 on
    topics: list[tuple[str | bytes, list[tuple[int, int, int]]]]
    version: int


_new_asked = tuple.__new__


def _read(message: bytes, at: int, version: int) -> FetchAsked | None:
    asked = fetch_request(message, at, version)
    return None if asked is None else _new_asked(FetchAsked, (*asked, version))


def _from_kio(request: Any) -> FetchAsked:
    """A request kio read (bytes ``kafka_fetch_request`` does not take, such as one with a tagged field)."""
    by_id = request.__version__ >= _TOPIC_IDS_FROM
    return FetchAsked(
        request.max_wait // _MILLISECOND,
        request.min_bytes,
        getattr(request, "max_bytes", _NO_LIMIT),
        getattr(request, "isolation_level", 0),
        [
            (
                (bytes(16) if topic.topic_id is None else topic.topic_id.bytes) if by_id else topic.topic,
                [(asked.partition, asked.fetch_offset, asked.partition_max_bytes) for asked in topic.partitions],
            )
            for topic in request.topics
        ],
        request.__version__,
    )


add_fast_reader(1, FastReader(_read, _from_kio, FETCH_REQUEST_VERSIONS))


class _Partition:
    """One partition of the request: its follower (or error) and what was read for it."""

    __slots__ = (
        "batches",
        "budget",
        "caught_up",
        "error",
        "follower",
        "index",
        "name",
        "stable_end",
        "starts",
        "topic",
    )

    def __init__(self, topic: str | bytes, name: str, index: int, budget: int) -> None:
        self.topic = topic  # as the request named it: by name, or by id from version 13 on
        self.name = name
        self.index = index
        self.starts: list[tuple[int, int]] = []  # (producer id, offset) of each transaction read that starts
        self.stable_end = False  # a read_committed read stopped at the last stable offset
        self.budget = budget  # bytes it may still take
        self.follower: PartitionFollower | None = None
        self.error = ErrorCode.none
        self.batches: list[bytes] = []  # record batches, encoded as they are read
        self.caught_up = False  # the last read found nothing more: the position is the partition's end


@register(1, "Fetch", min_version=FETCH_REQUEST_VERSIONS[0], max_version=FETCH_REQUEST_VERSIONS[-1])
async def fetch(context: RequestContext, request: FetchAsked) -> ResponseFrame:
    """Read every partition asked for; wait for more up to ``max_wait_ms`` if there is too little."""
    answer = fetch_now(context, request)
    if isinstance(answer, Later):
        finished: ResponseFrame = await answer.finish()
        return finished
    return answer


@answers_now(1)
def fetch_now(context: RequestContext, request: FetchAsked) -> ResponseFrame | Later:
    """The same, without a task when the answer needs no wait: the data is there (``min_bytes`` of
    it), or the client does not wait (``max_wait_ms`` 0); otherwise ``Later`` goes on from what
    was read, in the connection's task."""
    job = _FetchJob(context, request)
    session = context.connection.fetches
    known = session.known_event_loop() if session.waits else None
    if known is not None and job.may_wait():
        # The last Fetch waited, so this one likely will: arm before the first look, which then
        # serves as the look after arming too (one read of the partition's end fewer).
        job.arm(known[0])
        job.read_all()
        if job.must_wait():
            return Later(job.finish, job.park)
        job.disarm()
        session.waits = False
        return job.response()
    job.read_all()
    if job.must_wait():
        session.waits = True
        return Later(job.finish)
    return job.response()


class _FetchJob:
    """One Fetch request: its partitions, what was read of each, the budget left."""

    __slots__ = ("_context", "_deadline", "_marks", "_parked", "_request", "_response_budget", "parts", "taken")

    def __init__(self, context: RequestContext, request: FetchAsked) -> None:
        self._context = context
        self._request = request
        gateway = context.gateway
        session = context.connection.fetches
        self._response_budget = request.max_bytes or _NO_LIMIT
        self.parts: list[_Partition] = []
        self.taken = 0
        # The followers armed for and each one's segment then (``arm``), until the wait takes them
        self._marks: tuple[list[PartitionFollower], list[int | None]] | None = None
        self._deadline: float | None = None  # when the long poll ends, on the loop's clock, once known
        # While parked (``park``): where the wake-up goes; None once it went, or the wait was called off
        self._parked: tuple[Callable[[Any], None], Callable[[Later], None], Callable[[Exception], None]] | None = None
        by_id = request.version >= _TOPIC_IDS_FROM
        for topic, partitions in request.topics:
            name = (TopicIds.of(gateway).name_of(topic) or "") if isinstance(topic, bytes) else topic
            for partition, fetch_offset, partition_max_bytes in partitions:
                part = _Partition(topic, name, partition, partition_max_bytes)
                if by_id and not name:
                    part.error = ErrorCode.unknown_topic_id
                else:
                    try:
                        check_topic_name(name)
                        part.follower = session.follower(name, partition, fetch_offset)
                    except Exception as error:
                        part.error = error_code_for(error)
                self.parts.append(part)

    def read_all(self) -> None:
        response_budget = self._response_budget
        read_committed = self._request.isolation_level == _READ_COMMITTED
        open_transactions = transactions_of(self._context.gateway).open
        for part in self.parts:
            follower = part.follower
            if follower is None:
                continue
            part.caught_up = False  # known only from this look: data may have come since the last
            if part.budget <= 0 or self.taken >= response_budget:
                continue
            if read_committed and open_transactions.holds_open(part.name, part.index):
                # Never past the first record of a transaction still open (Kafka's last stable offset)
                high_watermark = follower.reader.bounds()[1]
                follower.end = open_transactions.last_stable_offset(part.name, part.index, high_watermark)
                try:
                    self._read_part(part, follower, response_budget)
                finally:
                    part.stable_end = follower.done
                    follower.end = None
                continue
            part.stable_end = False
            self._read_part(part, follower, response_budget)

    def _read_part(self, part: _Partition, follower: PartitionFollower, response_budget: int) -> None:
        self._context.connection.fetches.reading(follower)
        # Chunks of at most MAX_STORED_RECORDS, each encoded as one record batch at once: the
        # batch's size is what the budgets count.
        max_count = MAX_STORED_RECORDS
        while part.budget > 0 and self.taken < response_budget:
            limit = min(part.budget, response_budget - self.taken)
            try:
                # Only the response's first batch may go over the limits (KIP-74).
                read = read_batch(follower, limit, max_count, at_least_one=not self.taken, starts=part.starts)
            except OffsetOutOfRangeError:
                part.error = ErrorCode.offset_out_of_range
                part.follower = None
                break
            if read is None:
                part.caught_up = True
                break
            batch, records = read
            if not records:
                break  # the next record does not fit in what is left: the next Fetch takes it
            size = len(batch)
            part.batches.append(batch)
            part.budget -= size
            self.taken += size
            # The next chunk fills what is left of the budget (the stored records are larger than
            # their Kafka records): as many records as that holds at this chunk's size a record,
            # and some more, so that its index entries are read for them and not for thousands.
            max_count = min(MAX_STORED_RECORDS, max(0, limit - size) // max(1, size // records) + 16)

    def followers(self) -> list[PartitionFollower]:
        return [part.follower for part in self.parts if part.follower is not None]

    def may_wait(self) -> bool:
        """True when the client waits for data it does not have yet (and the gateway is not closing)."""
        request = self._request
        return (
            self.taken < request.min_bytes
            and request.max_wait_ms > 0
            and bool(self.followers())
            and not self._context.gateway.closing
        )

    def must_wait(self) -> bool:
        """True when the first look found too little and the client waits for more."""
        return self.may_wait()

    def arm(self, loop: object) -> None:
        """Ready the wake-ups of every partition and arm the waiter: any write from now on wakes
        the wait, so the look that follows is the last one before sleeping."""
        followers = self.followers()
        marks = [follower.prepare_wait() for follower in followers]
        session = self._context.connection.fetches
        session.notifier.read_unread()
        session.waiter.arm(loop)
        self._marks = (followers, marks)

    def disarm(self) -> None:
        self._marks = None
        self._context.connection.fetches.waiter.disarm()

    def response(self) -> ResponseFrame:
        return _response(self._context, self._request, self.parts)

    def park(
        self,
        answer: Callable[[ResponseFrame], None],
        go_on: Callable[[Later], None],
        fail: Callable[[Exception], None],
    ) -> Callable[[], None] | None:
        """Wait for the first wake-up without a task (``Later.park``): on asyncio, armed before
        the first look, every partition woken by its producer in this process (no inotify to
        read). The wait's future calls ``_woken``, which answers, or hands the rest of the long
        poll to the task (``go_on``: a wake-up that brought less than ``min_bytes``). The deadline
        is the waiter's loop timer, as ``Notifier.wait``'s on asyncio (capped at the backup poll).
        Returns the function that calls the wait off; None when this wait cannot be parked."""
        marks = self._marks
        session = self._context.connection.fetches
        waiter = session.waiter
        loop = waiter.asyncio_loop
        if marks is None or loop is None or waiter.event is None:
            return None
        future = cast("asyncio.Future[None]", waiter.event)  # (a waiter's event on asyncio)
        if future.done():
            return None  # woken already: the task reads at once
        followers, bases = marks
        if any(f.uses_inotify or f.moved_since(base) for f, base in zip(followers, bases, strict=True)):
            return None
        self._marks = None
        deadline = self._deadline = loop.time() + self._request.max_wait_ms / 1000
        timer = waiter.asyncio_deadline
        if timer is None:
            timer = waiter.asyncio_deadline = AsyncioDeadline(loop)
        timer.start(waiter, min(deadline - loop.time(), session.notifier.poll_seconds))
        self._parked = (answer, go_on, fail)
        future.add_done_callback(self._woken)
        return self._call_off

    def _call_off(self) -> None:
        """The connection is closing: nothing is answered, the waiter is left (no wake-up ends up here)."""
        if self._parked is not None:
            self._parked = None
            self._context.connection.fetches.waiter.disarm()

    def _woken(self, _: object) -> None:
        """The parked wait ended (a wake-up, the deadline, the backup poll): as ``finish`` goes on."""
        parked, self._parked = self._parked, None
        if parked is None:
            return  # called off
        answer, go_on, fail = parked
        session = self._context.connection.fetches
        waiter = session.waiter
        woken = waiter.fired
        waiter.disarm()
        try:
            gateway = self._context.gateway
            if woken:
                self.read_all()
                if self.taken >= self._request.min_bytes or gateway.closing:
                    answer(self.response())
                    return
            else:
                for follower in self.followers():
                    follower.choose_wakeups()  # a producer may have come or gone meanwhile
            assert self._deadline is not None
            if waiter.asyncio_loop is None or waiter.asyncio_loop.time() >= self._deadline or not self.followers():
                answer(self.response())
                return
        except Exception as error:  # the connection's task raises it, for the gateway's logging
            fail(error)
            return
        go_on(Later(self.finish))

    async def finish(self) -> ResponseFrame:
        """The long poll: wait for the stream's wake-ups until ``min_bytes`` are there or
        ``max_wait_ms`` has passed since the first look, then answer."""
        gateway = self._context.gateway
        session = self._context.connection.fetches
        min_bytes = self._request.min_bytes
        loop, clock = session.event_loop()
        deadline = self._deadline
        if deadline is None:
            deadline = clock() + self._request.max_wait_ms / 1000
        waiter = session.waiter
        armed, self._marks = self._marks, None
        while True:
            looked = armed is not None  # armed before the first look (``fetch_now``): that was the look
            if armed is not None:
                (followers, marks), armed = armed, None
            else:
                followers = self.followers()
                marks = [follower.prepare_wait() for follower in followers]
                session.notifier.read_unread()
                waiter.arm(loop)
            try:
                if not looked:
                    self.read_all()  # the look after arming: a write before the arm is found here
                if self.taken >= min_bytes or gateway.closing:
                    break
                if any(f.moved_since(mark) for f, mark in zip(followers, marks, strict=True)):
                    continue  # a new segment to watch before sleeping
                left = deadline - clock()
                if left <= 0:
                    break
                woken = await session.wait(followers, left)
            finally:
                waiter.disarm()
            if woken:
                self.read_all()
                if self.taken >= min_bytes or gateway.closing:
                    break
            if clock() >= deadline:
                break
            if not self.followers():
                break
        return self.response()


def _response(context: RequestContext, request: FetchAsked, parts: list[_Partition]) -> ResponseFrame:
    """The response frame, written whole by one compiled call (the record batches copied once, into
    it); in Python when a partition has a transaction open, or a read_committed answer lists aborted
    transactions (``fetch_answer_with_transactions``)."""
    session = context.connection.fetches
    open_transactions = transactions_of(context.gateway).open
    read_committed = request.isolation_level == _READ_COMMITTED
    with_transactions = False
    by_topic: dict[str | bytes, list[tuple[Any, ...]]] = {}
    for part in parts:
        high_watermark = log_start = -1
        error = part.error
        follower = part.follower
        if error == ErrorCode.none and follower is not None:
            try:
                # A read that came back empty found the end (unless the LSO stopped it): no need to
                # look it up again.
                caught_up = part.caught_up and not part.stable_end
                high_watermark = follower.position if caught_up else follower.reader.bounds()[1]
                log_start = session.log_start(follower)
            except OSError as failure:
                error = error_code_for(failure)
        # Empty, never null: librdkafka refuses a null record set (size -1) as a malformed response.
        records = part.batches if error == ErrorCode.none else []
        partitions = by_topic.get(part.topic)
        if partitions is None:
            partitions = by_topic[part.topic] = []
        entry: tuple[Any, ...] = (part.index, error, high_watermark, log_start, records)
        if follower is not None and error == ErrorCode.none:
            last_stable = open_transactions.last_stable_offset(part.name, part.index, high_watermark)
            aborted = (
                aborted_among(follower.reader.transaction_outcomes(), part.starts)
                if read_committed and part.starts
                else None
            )
            if last_stable != high_watermark or aborted:
                entry = (*entry, last_stable, aborted if read_committed else None)
                with_transactions = True
        partitions.append(entry)
    answer = fetch_answer_with_transactions if with_transactions else fetch_answer
    return ResponseFrame(answer(context.header.correlation_id, request.version, list(by_topic.items())))
