"""The gateway's open files: the limit raised at start, the share writers may use, and the LRU of
the partitions written, the topics' producers and the partitions' readers that keeps within it.

A partition being written holds ``WRITE_FILES_PER_PARTITION`` descriptors (its active segment's
``.data``, ``.index``, ``.timeindex``, ``.tagindex``, ``.keyindex``), an open producer
``STREAM_FILES`` of its own, a partition a client reads about ``READ_FILES_PER_PARTITION`` (its
segment's ``.index`` and ``.data``). A gateway serving thousands of partitions cannot keep them all
open at a default ``ulimit -n``, so:

- ``raise_open_files_limit`` lifts the soft ``RLIMIT_NOFILE`` to the hard one when the gateway
  starts (the soft limit is only a default; a process may raise it up to the hard one);
- ``FileBudget`` splits what the connections leave (``_accepting.connection_limit``) between
  writers and readers, and keeps a least-recently-used order of each. A topic's producer opens with
  every partition parked (``_async/partition_writes.py``: the files closed, the position kept), and
  a partition's files are opened when it is written: first the partitions written longest ago and
  idle (no write in flight) are parked, then, if that is not enough, the producers idle longest are
  closed, until the new files fit. So one topic may have any number of partitions: only those
  written lately hold files. A partition read first releases the files of the readers used longest
  ago (a reader keeps its position and reopens its segment on its next read);
- a shared producer (``--shared``: other processes write beside it, so its partitions are followed
  under their locks and not parked) holds every partition's files while open: such a topic that
  could not be written within the writers' whole share is refused when it is created or grown,
  with Kafka's POLICY_VIOLATION, and the message says which limit to raise.
"""

from __future__ import annotations

import contextlib
import resource
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Final

__all__ = [
    "READ_FILES_PER_PARTITION",
    "STREAM_FILES",
    "WRITE_FILES_PER_PARTITION",
    "FileBudget",
    "TooManyPartitionsError",
    "raise_open_files_limit",
    "topic_files",
]

WRITE_FILES_PER_PARTITION: Final = 5
READ_FILES_PER_PARTITION: Final = 2
# An open producer's own files besides its partitions': the owner lock, its entry under writers/,
# the setup and vacuum locks, the settings watch.
STREAM_FILES: Final = 6
# Kept out of the budget for everything else the process opens: the listening sockets, inotify,
# the log, groups' offset files and lock files while they are written, worker threads' files.
_HEADROOM: Final = 64
_MIN_FILES_RESERVE: Final = 128  # what the connections leave at the least (see _accepting.py)
_WRITERS_SHARE: Final = 0.75  # of the files' budget; the readers have the rest


def _nr_open() -> int | None:
    """The kernel's ceiling on a process's descriptors (``fs.nr_open``), if it can be read."""
    try:
        with open("/proc/sys/fs/nr_open", encoding="ascii") as file:
            return int(file.read().strip())
    except (OSError, ValueError):
        return None


def raise_open_files_limit() -> tuple[int, int]:
    """Lift the soft open-files limit to the hard one (bounded by ``fs.nr_open`` when the hard one
    is unlimited); the (soft, hard) limits in force afterwards. A refusal leaves the limit as it was."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard
    if hard == resource.RLIM_INFINITY:
        ceiling = _nr_open()
        if ceiling is None:
            return soft, hard
        target = ceiling
    if soft != resource.RLIM_INFINITY and soft < target:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def topic_files(partitions: int) -> int:
    """The descriptors an open producer of a topic of ``partitions`` partitions holds."""
    return STREAM_FILES + partitions * WRITE_FILES_PER_PARTITION


class TooManyPartitionsError(ValueError):
    """A shared topic whose producer could not be open within the gateway's open-files limit."""


PartitionKey = tuple[str, int]  # (topic, partition)


class FileBudget:
    """The writers' and the readers' shares of the open-files limit, and their LRU orders."""

    def __init__(self, soft_limit: int | None = None) -> None:
        if soft_limit is None:
            soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            soft_limit = None if soft == resource.RLIM_INFINITY else int(soft)
        self.soft_limit = soft_limit
        if soft_limit is None:
            self.writer_files: int | None = None
            self.reader_files: int | None = None
        else:
            files = max(_MIN_FILES_RESERVE, soft_limit // 4) - _HEADROOM
            self.writer_files = max(topic_files(1), int(files * _WRITERS_SHARE))
            self.reader_files = max(4 * READ_FILES_PER_PARTITION, files - self.writer_files)
        self._writers: OrderedDict[str, int] = OrderedDict()  # topic -> its producer's own files
        self._partitions: OrderedDict[PartitionKey, None] = OrderedDict()  # partitions open for writing
        self._readers: OrderedDict[Hashable, Callable[[], None]] = OrderedDict()  # reader -> release

    # -- writers ---------------------------------------------------------------------------------

    def check_partitions(self, topic: str, partitions: int, *, shared: bool) -> None:
        """TooManyPartitionsError if a shared topic of ``partitions`` could not be written at all
        here (an exclusive one parks its idle partitions: any count fits)."""
        if not shared or self.writer_files is None or topic_files(partitions) <= self.writer_files:
            return
        most = (self.writer_files - STREAM_FILES) // WRITE_FILES_PER_PARTITION
        raise TooManyPartitionsError(
            f"topic {topic!r} with {partitions} partitions would hold {topic_files(partitions)} open files while "
            f"written by a shared producer (--shared keeps every partition open), and this gateway's open-files "
            f"limit ({self.soft_limit}, the hard limit of `ulimit -n`) leaves topics {self.writer_files}: give it "
            f"at most {most} partitions, serve it without --shared, or start the gateway with a higher hard limit "
            "(ulimit -Hn, LimitNOFILE= in systemd)"
        )

    @property
    def writer_files_used(self) -> int:
        """Descriptors the open producers and the partitions open for writing hold, as counted."""
        return sum(self._writers.values()) + len(self._partitions) * WRITE_FILES_PER_PARTITION

    def writer_opened(self, topic: str, files: int = STREAM_FILES) -> None:
        """Count a topic's producer as open (and used just now), holding ``files`` of its own (a
        shared producer: ``topic_files`` of its partitions, which it never parks)."""
        self._writers[topic] = files
        self._writers.move_to_end(topic)

    def writer_used(self, topic: str) -> None:
        """The topic's producer was used: the last to be closed for room."""
        if topic in self._writers:
            self._writers.move_to_end(topic)

    def writer_closed(self, topic: str) -> None:
        """The topic's producer is closed, its partitions' files with it."""
        self._writers.pop(topic, None)
        for key in [key for key in self._partitions if key[0] == topic]:
            del self._partitions[key]

    def partition_opened(self, topic: str, partition: int) -> None:
        """Count a partition's files as open for writing (and used just now)."""
        self._partitions[topic, partition] = None
        self._partitions.move_to_end((topic, partition))

    def partition_used(self, topic: str, partition: int) -> None:
        """The partition was written: the last to be parked for room."""
        key = (topic, partition)
        if key in self._partitions:
            self._partitions.move_to_end(key)

    def partition_parked(self, topic: str, partition: int) -> None:
        """The partition's files are closed (parked)."""
        self._partitions.pop((topic, partition), None)

    def partition_open(self, topic: str, partition: int) -> bool:
        """True when the partition's files are counted as open."""
        return (topic, partition) in self._partitions

    def room_for(
        self, files: int, busy_partition: Callable[[PartitionKey], bool], busy_topic: Callable[[str], bool]
    ) -> tuple[list[PartitionKey], list[str]]:
        """What to close so that ``files`` more fit: the partitions to park, written longest ago
        first, then (if that is not enough) the producers to close, idle longest first. A partition
        ``busy_partition`` names, or a producer ``busy_topic`` names or one of whose partitions is
        busy, is never chosen. What can be freed may fall short: the caller then goes over."""
        if self.writer_files is None:
            return [], []
        needed = self.writer_files_used + files - self.writer_files
        to_park: list[PartitionKey] = []
        for key in self._partitions:
            if needed <= 0:
                break
            if not busy_partition(key):
                to_park.append(key)
                needed -= WRITE_FILES_PER_PARTITION
        to_close: list[str] = []
        for topic, own in self._writers.items():
            if needed <= 0:
                break
            if busy_topic(topic):
                continue
            still_open = [key for key in self._partitions if key[0] == topic and key not in to_park]
            if any(busy_partition(key) for key in still_open):
                continue
            to_close.append(topic)
            needed -= own + len(still_open) * WRITE_FILES_PER_PARTITION
        return to_park, to_close

    @property
    def writers_open(self) -> int:
        """Open producers counted."""
        return len(self._writers)

    @property
    def partitions_open(self) -> int:
        """Partitions counted as open for writing."""
        return len(self._partitions)

    # -- readers ---------------------------------------------------------------------------------
    def reader_used(self, key: Hashable, release: Callable[[], None]) -> None:
        """A partition reader just read: it goes last in the order; the readers used longest ago
        release their files (``release``) when there are more than the readers' share allows."""
        readers = self._readers
        if key in readers:
            readers.move_to_end(key)
            return
        readers[key] = release
        if self.reader_files is None:
            return
        most = max(1, self.reader_files // READ_FILES_PER_PARTITION)
        while len(readers) > most:
            _oldest, release_oldest = readers.popitem(last=False)
            release_oldest()

    def reader_gone(self, key: Hashable) -> None:
        """A reader closed (its files with it): no longer counted."""
        self._readers.pop(key, None)

    @property
    def readers_open(self) -> int:
        """Readers counted as holding files."""
        return len(self._readers)
