"""``adiskq read``: print messages; ``--follow`` stays open like ``tail -f``; ``--group`` resumes and commits.

Without ``--follow`` or ``--group`` it reads what is in the stream now through the synchronous
storage layer (no event loop): each partition from ``--start`` to ``--end`` (by default, the end of
what was there when it began), the partitions merged by timestamp. ``--follow`` stays open, woken
by inotify: through an unnamed ``adiskq.ConsumerGroup`` (every partition, new ones included), or one
``adiskq.Consumer`` per partition when ``--partition`` or ``--end`` is given. ``--group NAME`` reads
through that named ``ConsumerGroup``, committing messages only once they have been written out, so
a closed pipe or a crash never commits a message the reader did not get (at least once).
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Final

import click

from .formats import Format, MessageSink, format_option, open_sink
from .output import warn
from .params import END, START, Position

if TYPE_CHECKING:
    from anyio.abc import ObjectSendStream

    from .._sansio.tags import TagFilter
    from .._sansio.values import Message
    from .._storage.partition_reader import PartitionReader
    from .._storage.stream import StreamReader

__all__ = ["read"]

_BATCH: Final = 1000


class Limit:
    """Counts messages written; ``reached`` once ``--limit`` of them were."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.count = 0

    def take(self) -> bool:
        """Count one more message; False once the limit was reached before it."""
        if self.limit is not None and self.count >= self.limit:
            return False
        self.count += 1
        return True

    @property
    def reached(self) -> bool:
        return self.limit is not None and self.count >= self.limit


def check_partitions(stream: StreamReader, chosen: tuple[int, ...]) -> list[int]:
    """The partitions to read: those chosen, or all; a usage error for one the stream lacks."""
    if chosen and max(chosen) >= stream.partition_count:
        stream.refresh()  # a producer may have added partitions since the stream was opened
    count = stream.partition_count
    for partition in chosen:
        if partition >= count:
            raise click.BadParameter(
                f"the stream has partitions 0..{count - 1}, not {partition}", param_hint="'--partition'"
            )
    return sorted(set(chosen)) if chosen else list(range(count))


def partition_messages(
    reader: PartitionReader, start: Position, end: Position | None, tags: TagFilter | None = None
) -> Iterator[Message]:
    """One partition's messages from ``start`` up to ``end`` (only those with one of ``tags``, when
    given), skipping what retention deleted meanwhile."""
    from .._errors import CorruptRecordError, OffsetOutOfRangeError

    position = reader.offset_of(start)
    stop = reader.offset_of("newest" if end is None else end)  # by default, what the partition holds now
    batch_size = _BATCH
    with reader.cursor(position) as cursor:
        while cursor.position < stop:
            try:
                if tags is not None:
                    batch, passed = cursor.read_tagged(batch_size, min(8192, stop - cursor.position), tags)
                    if not passed:
                        return
                    yield from batch
                    continue
                batch = cursor.read(min(batch_size, stop - cursor.position))
            except CorruptRecordError:
                if batch_size == 1:
                    raise
                # Deliver the sound messages before the damage one by one; the bad one raises.
                batch_size = 1
                continue
            except OffsetOutOfRangeError as error:
                oldest = error.oldest_offset if error.oldest_offset is not None else cursor.position
                warn(
                    f"partition {reader.partition}: offsets {cursor.position}..{oldest - 1} were deleted by "
                    f"retention; reading on from {oldest}"
                )
                cursor.seek(oldest)
                continue
            if not batch:
                return  # fewer messages than --end named
            yield from batch


def read_now(
    path: str,
    chosen: tuple[int, ...],
    start: Position,
    end: Position | None,
    sink: MessageSink,
    limit: Limit,
    tags: TagFilter | None = None,
) -> None:
    """What the stream holds now, partitions merged by timestamp (each partition stays in order)."""
    from .._storage.stream import StreamReader

    stream = StreamReader.open(path)
    partitions = check_partitions(stream, chosen)
    sources: Iterable[Message]
    if len(partitions) == 1:
        sources = partition_messages(stream.partition(partitions[0]), start, end, tags)
    else:
        sources = heapq.merge(
            *(partition_messages(stream.partition(p), start, end, tags) for p in partitions),
            key=lambda m: (m.timestamp_ns, m.partition),
        )
    try:
        for message in sources:
            if not limit.take():
                break
            sink.write(message)
    finally:
        sink.flush()  # what was read before an error is printed before it


async def follow_partitions(
    path: str,
    chosen: tuple[int, ...],
    start: Position,
    end: int | None,
    sink: MessageSink,
    limit: Limit,
    tags: frozenset[str] | None = None,
) -> None:
    """Each chosen partition through its own ``Consumer``, printed as batches arrive, until ``--end``."""
    import anyio

    import adiskq

    from .._storage.stream import StreamReader

    partitions = check_partitions(StreamReader.open(path), chosen)
    send, receive = anyio.create_memory_object_stream[list[adiskq.Message]](max_buffer_size=len(partitions))

    async def pump(partition: int, send: ObjectSendStream[list[Message]]) -> None:
        async with (
            send,
            adiskq.Consumer(path, partition, start=start, end="wait" if end is None else end, tags=tags) as consumer,
        ):
            async for batch in consumer.batches():
                await send.send(batch)

    async with anyio.create_task_group() as tasks:
        async with send:
            for partition in partitions:
                tasks.start_soon(pump, partition, send.clone())
        async with receive:
            async for batch in receive:
                for message in batch:
                    if not limit.take():
                        break
                    sink.write(message)
                sink.flush()
                if limit.reached:
                    tasks.cancel_scope.cancel()
                    break


async def read_group(
    path: str,
    name: str | None,
    start: Position,
    wait: bool,
    sink: MessageSink,
    limit: Limit,
    tags: frozenset[str] | None = None,
) -> None:
    """All partitions through one ``ConsumerGroup``; with a name, from its commits, committing what is out.

    A batch is written and flushed before any of it is committed: a message lost to a closed pipe
    or a crash is read again (at least once), never skipped.
    """
    import adiskq

    async with adiskq.ConsumerGroup(path, name, start=start, end="wait" if wait else "close", tags=tags) as group:
        async for batch in group.batches():
            written = []
            for message in batch:
                if not limit.take():
                    break
                sink.write(message)
                written.append(message)
            sink.flush()
            if name is not None:
                for message in written:
                    group.commit(message)
            if limit.reached:
                break


async def until_terminated(work: Callable[[], Awaitable[None]]) -> int | None:
    """Run ``work`` until it ends, or until SIGTERM or SIGHUP ends it as Ctrl-C would.

    Consumers close and groups store their commits, as under a service manager's stop. Returns the
    signal that ended it, or None.
    """
    import signal

    import anyio

    received: int | None = None
    async with anyio.create_task_group() as tasks:

        async def watch() -> None:
            nonlocal received
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
                async for signum in signals:
                    received = signum
                    tasks.cancel_scope.cancel()
                    return

        tasks.start_soon(watch)
        await work()
        tasks.cancel_scope.cancel()
    return received


@click.command()
@click.argument("path", type=click.Path(path_type=str))
@click.option(
    "--partition",
    "-p",
    "partitions",
    multiple=True,
    type=click.IntRange(0),
    help="Read only this partition (repeat for more). Default: all.",
)
@click.option(
    "--start",
    "-s",
    type=START,
    default="oldest",
    show_default=True,
    help="Where to begin: oldest, newest, active-oldest, an offset, or an ISO-8601 time (UTC unless a zone is given).",
)
@click.option(
    "--end",
    "-e",
    type=END,
    help="Where to stop (exclusive): newest, an offset, or a time. Default: the end of what is there now.",
)
@click.option("--follow", "-f", is_flag=True, help="Keep reading new messages as they arrive, like tail -f.")
@click.option("--group", "-g", metavar="NAME", help="Read as this consumer group: resume where it stopped, commit.")
@click.option(
    "--tag",
    "-t",
    "tags",
    multiple=True,
    metavar="TAG",
    help="Print only messages with this tag (repeat for several: any of them). Default: every message.",
)
@format_option
@click.option("--limit", "-n", type=click.IntRange(1), help="Stop after this many messages.")
def read(
    path: str,
    partitions: tuple[int, ...],
    start: Position,
    end: Position | None,
    follow: bool,
    group: str | None,
    tags: tuple[str, ...],
    output: Format,
    limit: int | None,
) -> None:
    """Print a stream's messages.

    By default every partition is read from its oldest message to the end of what is there now,
    merged by timestamp, as JSON lines (bytes that are not UTF-8 as base64, marked by a
    *_encoding field). With --follow it stays open and prints new messages as they arrive (end it
    with Ctrl-C). With --group NAME it starts where that group stopped and commits what it prints.
    In a pipe, `| head` ends it quietly.

    \b
    Examples:
      adiskq read orders --limit 10
      adiskq read orders -p 0 --start 2026-01-31T08:00:00Z --end 2026-01-31T09:00:00Z
      adiskq read orders --follow --format value
      adiskq read orders --group billing --format pretty
      adiskq read orders --tag created --tag paid
      adiskq read orders | jq -r 'select(.headers.type == "created") | .value'
    """
    import os

    import anyio

    from .._sansio.naming import validate_group_name

    if group is not None:
        if partitions:
            raise click.UsageError("--group reads the partitions the group is given; leave out --partition")
        if end is not None:
            raise click.UsageError("--group reads to the end of the stream (or follows it); leave out --end")
        try:
            validate_group_name(group)
        except ValueError as error:
            raise click.BadParameter(str(error), param_hint="'--group'") from None
    if follow and end is not None and not isinstance(end, int):
        raise click.UsageError("with --follow, --end takes an offset (a time or 'newest' works without --follow)")
    from .._sansio.tags import TagFilter

    try:
        tag_filter = TagFilter.of(tags or None)
    except (ValueError, TypeError) as error:
        raise click.BadParameter(str(error), param_hint="'--tag'") from None
    wanted = frozenset(tags) if tags else None
    path = os.fspath(path)
    sink = open_sink(output)
    counter = Limit(limit)
    work: Callable[[], Awaitable[None]]
    if group is not None:
        work = functools.partial(read_group, path, group, start, follow, sink, counter, wanted)
    elif follow and not partitions and end is None:
        # One unnamed group follows every partition, those added while it runs included.
        work = functools.partial(read_group, path, None, start, True, sink, counter, wanted)
    elif follow:
        work = functools.partial(
            follow_partitions, path, partitions, start, end if isinstance(end, int) else None, sink, counter, wanted
        )
    else:
        read_now(path, partitions, start, end, sink, counter, tag_filter)
        return
    signum = anyio.run(until_terminated, work)
    if signum is not None:
        raise click.exceptions.Exit(128 + signum)  # as a shell reports a process ended by that signal
