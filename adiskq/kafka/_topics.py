"""Topics: the stream folders directly under the gateway's root, and the producers that write them.

A topic is a stream of the same name in ROOT. Its name is checked as Kafka checks one (ASCII letters,
digits, ``.``, ``_``, ``-``; at most 249 characters; not ``.`` or ``..``), which also keeps every
topic a direct child of ROOT: no separator, no parent, no hidden escape. The gateway opens one
producer per topic the first time a client writes it and keeps it until the topic is deleted, the
gateway closes, or the open-files budget needs its files for another topic (``_open_files.py``: the
producer idle longest is closed, and reopened on its next write). The producer opens with its
partitions parked (their files closed), and a partition's files are opened when it is written and
closed again when the budget needs them for another (the partition written longest ago and idle
first), so a topic may have more partitions than the open-files limit holds. While open it is the stream's
writer (a second exclusive writer elsewhere is then refused, as for any adiskq producer;
``shared=True`` lets library producers in other processes write beside it). A topic is created
whole or not at all (``_storage/stream_creation.py``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
from collections.abc import AsyncIterator
from typing import Any, Final, Literal

import anyio

from .._async.partition_writes import is_parked, opened, park, unpark
from .._async.producer import Producer
from .._errors import OffsetOutOfRangeError, StreamNotFoundError
from .._storage.log_start import save_log_start
from .._storage.settings import load_settings
from .._storage.stream import StreamReader
from .._storage.stream_creation import build_stream
from ._open_files import STREAM_FILES, WRITE_FILES_PER_PARTITION, FileBudget, PartitionKey, topic_files

logger = logging.getLogger("adiskq.kafka")

__all__ = ["MAX_TOPIC_NAME_LENGTH", "InvalidTopicError", "TopicExistsError", "Topics", "check_topic_name"]

MAX_TOPIC_NAME_LENGTH: Final = 249
_LEGAL: Final = re.compile(r"[a-zA-Z0-9._-]+")


class InvalidTopicError(ValueError):
    """A topic name Kafka would refuse (and that could name something other than a folder in ROOT)."""


class TopicExistsError(ValueError):
    """CreateTopics of a topic that is there already."""


def check_topic_name(name: object) -> str:
    """``name`` if it is a legal Kafka topic name; InvalidTopicError saying why not otherwise."""
    if not isinstance(name, str) or not name:
        raise InvalidTopicError("a topic name is 1 to 249 characters of [a-zA-Z0-9._-]")
    if name in (".", ".."):
        raise InvalidTopicError(f"{name!r} is not a topic name: '.' and '..' are refused")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(f"a topic name is at most {MAX_TOPIC_NAME_LENGTH} characters, not {len(name)}")
    if _LEGAL.fullmatch(name) is None:
        raise InvalidTopicError(f"{name!r} is not a topic name: use only ASCII letters, digits, '.', '_' and '-'")
    return name


class Topics:
    """The topics under one root: listing, readers, the gateway's producers, creation and deletion."""

    def __init__(self, root: str, *, default_partitions: int, flush: Literal["async", "sync"], shared: bool) -> None:
        self.root = os.path.abspath(root)
        self.default_partitions = default_partitions
        self.flush: Literal["async", "sync"] = flush
        self.shared = shared
        self._readers: dict[str, StreamReader] = {}
        self._writers: dict[str, Producer] = {}
        self._locks: dict[str, anyio.Lock] = {}
        self.budget = FileBudget()
        self._writing: dict[str, int] = {}  # topic -> writes awaiting its producer now
        self._writing_partitions: dict[PartitionKey, int] = {}  # (topic, partition) -> writes in flight
        self._room = anyio.Lock()  # one making of room (parking, closing) and opening of files at a time
        # Bumped whenever a topic is deleted or its partitions change: readers that cached files or
        # counts of the old topic look again.
        self.generation = 0
        self.closed = False

    def path(self, name: str) -> str:
        """The topic's folder (the name checked first)."""
        return os.path.join(self.root, check_topic_name(name))

    def names(self) -> list[str]:
        """Every topic: each folder directly under ROOT that holds a stream, by name."""
        found = []
        try:
            entries = list(os.scandir(self.root))
        except FileNotFoundError:
            return []
        for entry in entries:
            if not entry.is_dir():
                continue
            try:
                check_topic_name(entry.name)
            except InvalidTopicError:
                continue
            if os.path.exists(os.path.join(entry.path, "settings.json")):
                found.append(entry.name)
        return sorted(found)

    def exists(self, name: str) -> bool:
        """True when the topic's stream is there."""
        if name in self._readers:
            return True
        try:
            return load_settings(self.path(name)) is not None
        except (OSError, ValueError):
            return False

    def reader(self, name: str) -> StreamReader:
        """The topic's stream opened for reading (cached); StreamNotFoundError if there is none."""
        reader = self._readers.get(name)
        if reader is None:
            reader = self._readers[name] = StreamReader.open(self.path(name))
        return reader

    def partition_count(self, name: str, *, fresh: bool = False) -> int:
        """The topic's partitions (``fresh``: read its settings again first)."""
        reader = self.reader(name)
        if fresh:
            reader.refresh()
        return reader.partition_count

    def _lock(self, name: str) -> anyio.Lock:
        lock = self._locks.get(name)
        if lock is None:
            lock = self._locks[name] = anyio.Lock()
        return lock

    def open_writer(self, name: str) -> Producer | None:
        """The gateway's producer of the topic if it is open already (None: ``writer`` opens it)."""
        producer = self._writers.get(name)
        if producer is not None:
            self.budget.writer_used(name)
        return producer

    @contextlib.asynccontextmanager
    async def writing(self, name: str, partition: int | None = None) -> AsyncIterator[Producer]:
        """The topic's producer, opened if need be, kept open (not closed for room) while the block
        runs; with ``partition``, that partition's files opened too (others parked for room if
        need be), and kept open while the block runs."""
        key = (name, -1 if partition is None else partition)
        self._writing[name] = self._writing.get(name, 0) + 1
        self._writing_partitions[key] = self._writing_partitions.get(key, 0) + 1
        try:
            producer = await self.writer(name)
            if partition is not None and 0 <= partition < producer.partitions:
                await self._open_partition(name, producer, partition)
            yield producer
        finally:
            left = self._writing[name] - 1
            if left:
                self._writing[name] = left
            else:
                del self._writing[name]
            left = self._writing_partitions[key] - 1
            if left:
                self._writing_partitions[key] = left
            else:
                del self._writing_partitions[key]

    def partition_written(self, name: str, partition: int) -> None:
        """A write to the partition was made at once: the last to be parked for room."""
        self.budget.partition_used(name, partition)

    async def _open_partition(self, name: str, producer: Producer, partition: int) -> None:
        """Open a parked partition's files, parking or closing what the budget needs for room."""
        if not is_parked(producer, partition):
            self.budget.partition_used(name, partition)
            return
        async with self._room:
            await self._make_room(name, WRITE_FILES_PER_PARTITION)
            if self._writers.get(name) is not producer:  # closed for room meanwhile: the write reopens it
                return
            await unpark(producer, partition)
            self.budget.partition_opened(name, partition)

    async def writer(self, name: str) -> Producer:
        """The gateway's producer of the topic, opened on first use (producers idle longest closed
        first when the open-files budget needs their room); StreamNotFoundError for a missing topic."""
        producer = self.open_writer(name)
        if producer is not None:
            return producer
        async with self._lock(name):
            producer = self.open_writer(name)
            if producer is not None:
                return producer
            if self.closed:
                raise StreamNotFoundError(self.path(name), "the gateway is closing")
            path = self.path(name)
            if not self.exists(name):
                raise StreamNotFoundError(path)
            return await self._open_producer(name, Producer(path, flush=self.flush, shared=self.shared))

    def _own_files(self, partitions: int) -> int:
        """The descriptors an open producer of ``partitions`` partitions holds before any is written:
        its own (a shared one keeps every partition open)."""
        return topic_files(partitions) if self.shared else STREAM_FILES

    async def _open_producer(self, name: str, producer: Producer, partitions: int | None = None) -> Producer:
        """Open the topic's producer (the caller holds the topic's lock), room made for it first;
        an exclusive one with every partition parked. ``partitions``: what it opens the topic with
        (its count now when None)."""
        files = self._own_files(self.partition_count(name, fresh=True) if partitions is None else partitions)
        async with self._room:
            await self._make_room(name, files)
            producer = await opened(producer, parked=not self.shared)
            self._writers[name] = producer
            self.budget.writer_opened(name, self._own_files(producer.partitions))
        return producer

    async def _make_room(self, name: str, files: int) -> None:
        """Park the partitions written longest ago, then close the producers idle longest, until
        ``files`` more fit the budget (the caller holds ``_room``).

        A partition being written (``writing``) is not parked, nor its producer closed; nor is a
        producer whose topic is being opened, grown or changed (its lock held), or ``name``'s. Each
        producer is closed under its topic's lock, so a write that comes for it meanwhile waits and
        opens it again once it is closed (never beside the closing one, whose lock on the stream
        would refuse it); no one holding a victim's lock waits for ``_room``."""

        def busy_partition(key: PartitionKey) -> bool:
            return key in self._writing_partitions

        def busy_topic(topic: str) -> bool:
            return topic == name or topic in self._writing or self._lock(topic).locked()

        to_park, to_close = self.budget.room_for(files, busy_partition, busy_topic)
        for topic, partition in to_park:
            producer = self._writers.get(topic)
            if producer is None or (topic, partition) in self._writing_partitions:
                continue
            try:
                parked = await park(producer, partition)
            except OSError as error:
                logger.warning("adiskq: could not close the files of %s-%d for room: %s", topic, partition, error)
                continue
            if parked:
                self.budget.partition_parked(topic, partition)
        for victim in to_close:
            lock = self._lock(victim)
            try:
                lock.acquire_nowait()  # never waited for: its holder may be waiting for _room
            except anyio.WouldBlock:
                continue
            try:
                await self._close_writer(victim)
            finally:
                lock.release()

    async def _close_writer(self, name: str) -> None:
        """Close the topic's producer, if it has one open (under the topic's lock, held by the caller)."""
        producer = self._writers.pop(name, None)
        self.budget.writer_closed(name)
        if producer is not None:
            await producer.aclose()

    async def create(self, name: str, partitions: int, **settings: Any) -> None:
        """Create the topic with ``partitions`` partitions (and these stream settings), whole or not
        at all; TopicExistsError if it is there, TooManyPartitionsError if a shared producer of it
        could not be open within the open-files limit."""
        self.budget.check_partitions(name, partitions, shared=self.shared)
        async with self._lock(name):
            if self.exists(name):
                raise TopicExistsError(f"topic {name!r} already exists")
            if self.closed:
                raise StreamNotFoundError(self.path(name), "the gateway is closing")
            async with self._room:  # the creation opens each partition in turn, parking it
                await self._make_room(name, topic_files(1))
                try:
                    await anyio.to_thread.run_sync(lambda: build_stream(self.root, name, partitions, **settings))
                except FileExistsError:
                    raise TopicExistsError(f"topic {name!r} already exists") from None

    async def ensure(self, name: str) -> bool:
        """Create the topic with the default partition count if it is missing; True if created."""
        if self.exists(name):
            return False
        try:
            await self.create(name, self.default_partitions)
        except TopicExistsError:
            return False
        return True

    async def grow(self, name: str, count: int) -> None:
        """Give the topic ``count`` partitions (more than it has): its producer reopens with them."""
        self.budget.check_partitions(name, count, shared=self.shared)
        async with self._lock(name):
            await self._close_writer(name)
            await self._open_producer(
                name, Producer(self.path(name), partitions=count, flush=self.flush, shared=self.shared), count
            )
            self._readers.pop(name, None)
            self.generation += 1

    async def reconfigure(self, name: str, **settings: Any) -> None:
        """Give the topic these stream settings (``segment_size_bytes``, ``retention``,
        ``max_message_bytes``): its producer reopens with them, which stores them."""
        async with self._lock(name):
            path = self.path(name)
            if not self.exists(name):
                raise StreamNotFoundError(path)
            await self._close_writer(name)
            await self._open_producer(name, Producer(path, flush=self.flush, shared=self.shared, **settings))
            self.reader(name).refresh()

    async def delete_records(self, name: str, offsets: dict[int, int]) -> dict[int, int | BaseException]:
        """Raise each partition's log start offset to the offset given (-1: its end), durably
        (``_storage/log_start.py``); each partition's log start offset after, or the error that
        refused it (OffsetOutOfRangeError past the end). The topic's producer then vacuums the
        segments below."""
        results: dict[int, int | BaseException] = {}
        async with self._lock(name):
            stream = self.reader(name)
            for number, offset in offsets.items():
                try:
                    partition = stream.partition(number)
                    oldest, next_offset = partition.bounds()
                    wanted = next_offset if offset == -1 else offset
                    if not 0 <= wanted <= next_offset:
                        raise OffsetOutOfRangeError(
                            f"offset {offset} is past the end of partition {number} of {name!r} (its high "
                            f"watermark is {next_offset}): delete records up to {next_offset} at most",
                            partition=number,
                            offset=offset,
                            next_offset=next_offset,
                        )
                    if wanted > oldest:
                        await anyio.to_thread.run_sync(save_log_start, partition.directory, wanted)
                    results[number] = max(oldest, wanted)
                except Exception as error:
                    results[number] = error
        async with self.writing(name) as producer:
            await producer.vacuum()
        return results

    async def delete(self, name: str) -> None:
        """Delete the topic's folder (its producer closed first); StreamNotFoundError if missing."""
        async with self._lock(name):
            path = self.path(name)
            if not self.exists(name):
                raise StreamNotFoundError(path)
            await self._close_writer(name)
            self._readers.pop(name, None)
            self.generation += 1
            await anyio.to_thread.run_sync(shutil.rmtree, path)

    async def aclose(self) -> None:
        """Close every producer the gateway opened (each writes what is pending and fsyncs)."""
        self.closed = True
        for name in self._writers:
            self.budget.writer_closed(name)
        writers, self._writers = list(self._writers.values()), {}
        with anyio.CancelScope(shield=True):
            for producer in writers:
                await producer.aclose()
        self._readers.clear()
