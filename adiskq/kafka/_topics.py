"""Topics: the stream folders directly under the gateway's root, and the producers that write them.

A topic is a stream of the same name in ROOT. Its name is checked as Kafka checks one (ASCII letters,
digits, ``.``, ``_``, ``-``; at most 249 characters; not ``.`` or ``..``), which also keeps every
topic a direct child of ROOT: no separator, no parent, no hidden escape. The gateway opens one
producer per topic the first time a client writes it and keeps it until the topic is deleted or the
gateway closes (a second exclusive writer elsewhere is then refused, as for any adiskq producer;
``shared=True`` lets library producers in other processes write beside it).
"""

from __future__ import annotations

import os
import re
import shutil
from typing import Final, Literal

import anyio

from .._async.partition_writes import opened
from .._async.producer import Producer
from .._errors import StreamNotFoundError
from .._storage.settings import load_settings
from .._storage.stream import StreamReader

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
        return self._writers.get(name)

    async def writer(self, name: str, *, create_partitions: int | None = None) -> Producer:
        """The gateway's producer of the topic, opened on first use.

        ``create_partitions``: create the topic with that many partitions when it is missing;
        without it a missing topic raises StreamNotFoundError.
        """
        producer = self._writers.get(name)
        if producer is not None:
            return producer
        async with self._lock(name):
            producer = self._writers.get(name)
            if producer is not None:
                return producer
            if self.closed:
                raise StreamNotFoundError(self.path(name), "the gateway is closing")
            path = self.path(name)
            if create_partitions is None and not self.exists(name):
                raise StreamNotFoundError(path)
            producer = await opened(Producer(path, partitions=create_partitions, flush=self.flush, shared=self.shared))
            self._writers[name] = producer
            return producer

    async def create(self, name: str, partitions: int) -> None:
        """Create the topic with ``partitions`` partitions; TopicExistsError if it is there."""
        async with self._lock(name):
            if self.exists(name):
                raise TopicExistsError(f"topic {name!r} already exists")
        await self.writer(name, create_partitions=partitions)

    async def ensure(self, name: str) -> bool:
        """Create the topic with the default partition count if it is missing; True if created."""
        if self.exists(name):
            return False
        async with self._lock(name):
            if self.exists(name):
                return False
        await self.writer(name, create_partitions=self.default_partitions)
        return True

    async def grow(self, name: str, count: int) -> None:
        """Give the topic ``count`` partitions (more than it has): its producer reopens with them."""
        async with self._lock(name):
            producer = self._writers.pop(name, None)
            if producer is not None:
                await producer.aclose()
            producer = await opened(Producer(self.path(name), partitions=count, flush=self.flush, shared=self.shared))
            self._writers[name] = producer
            self._readers.pop(name, None)
            self.generation += 1

    async def delete(self, name: str) -> None:
        """Delete the topic's folder (its producer closed first); StreamNotFoundError if missing."""
        async with self._lock(name):
            path = self.path(name)
            if not self.exists(name):
                raise StreamNotFoundError(path)
            producer = self._writers.pop(name, None)
            if producer is not None:
                await producer.aclose()
            self._readers.pop(name, None)
            self.generation += 1
            await anyio.to_thread.run_sync(shutil.rmtree, path)

    async def aclose(self) -> None:
        """Close every producer the gateway opened (each writes what is pending and fsyncs)."""
        self.closed = True
        writers, self._writers = list(self._writers.values()), {}
        with anyio.CancelScope(shield=True):
            for producer in writers:
                await producer.aclose()
        self._readers.clear()
