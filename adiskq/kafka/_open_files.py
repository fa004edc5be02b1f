"""The gateway's open files: the limit raised at start, the share topics may use, and the LRU of
the topics' producers and the partitions' readers that keeps within it.

A written partition holds about ``WRITE_FILES_PER_PARTITION`` descriptors while its topic's producer
is open (``.data``, ``.index``, ``.timeindex``, ``.keyindex``, the partition's lock), a partition a
client reads about ``READ_FILES_PER_PARTITION`` (its segment's ``.index`` and ``.data``). A gateway
serving thousands of partitions cannot keep them all open at a default ``ulimit -n``, so:

- ``raise_open_files_limit`` lifts the soft ``RLIMIT_NOFILE`` to the hard one when the gateway
  starts (the soft limit is only a default; a process may raise it up to the hard one);
- ``FileBudget`` splits what the connections leave (``_accepting.connection_limit``) between
  producers and readers, and keeps a least-recently-used order of each: opening a topic's producer
  first closes the producers idle longest (no write in flight) until the new one fits, and a
  partition read first releases the files of the readers used longest ago (a reader keeps its
  position and reopens its segment on its next read);
- a topic that could not be written within the producers' whole share is refused when it is created
  or grown, with Kafka's POLICY_VIOLATION (what a Kafka controller answers for more partitions than
  it creates in one request), and the message says which limit to raise.
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
    """A topic whose producer could not be open within the gateway's open-files limit."""


class FileBudget:
    """The producers' and the readers' shares of the open-files limit, and their LRU orders."""

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
        self._writers: OrderedDict[str, int] = OrderedDict()  # topic -> its producer's files
        self._readers: OrderedDict[Hashable, Callable[[], None]] = OrderedDict()  # reader -> release

    # -- producers -------------------------------------------------------------------------------

    def check_partitions(self, topic: str, partitions: int) -> None:
        """TooManyPartitionsError if a topic of ``partitions`` could not be written at all here."""
        if self.writer_files is None or topic_files(partitions) <= self.writer_files:
            return
        most = (self.writer_files - STREAM_FILES) // WRITE_FILES_PER_PARTITION
        raise TooManyPartitionsError(
            f"topic {topic!r} with {partitions} partitions would hold {topic_files(partitions)} open files while "
            f"written, and this gateway's open-files limit ({self.soft_limit}, the hard limit of `ulimit -n`) "
            f"leaves topics {self.writer_files}: give it at most {most} partitions, or start the gateway with a "
            "higher hard limit (ulimit -Hn, LimitNOFILE= in systemd)"
        )

    def writer_opened(self, topic: str, partitions: int) -> None:
        """Count a topic's producer as open (and used just now)."""
        self._writers[topic] = topic_files(partitions)
        self._writers.move_to_end(topic)

    def writer_used(self, topic: str) -> None:
        """The topic's producer was used: the last to be closed for room."""
        if topic in self._writers:
            self._writers.move_to_end(topic)

    def writer_closed(self, topic: str) -> None:
        """The topic's producer is closed."""
        self._writers.pop(topic, None)

    def writers_to_close(self, topic: str, partitions: int, busy: Callable[[str], bool]) -> list[str]:
        """The open producers to close, idle longest first, so that one of ``topic`` with
        ``partitions`` partitions fits; a producer ``busy`` says is writing is never chosen."""
        if self.writer_files is None:
            return []
        needed = topic_files(partitions) + sum(files for name, files in self._writers.items() if name != topic)
        chosen = []
        for name, files in self._writers.items():
            if needed <= self.writer_files:
                break
            if name == topic or busy(name):
                continue
            chosen.append(name)
            needed -= files
        return chosen

    @property
    def writers_open(self) -> int:
        """Open producers counted."""
        return len(self._writers)

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
