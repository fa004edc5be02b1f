"""The exceptions adiskq raises; every message says what happened and what to do about it.

::

    Error
    ├── StreamNotFoundError        (also FileNotFoundError) nothing stream-like at the path
    ├── NotAStreamError            (also ValueError) a file, or a folder holding something else
    ├── StreamLockedError          other producers hold the stream (exclusive vs shared)
    │   └── LockTimeoutError       a shared producers' lock (locks/) was not let go
    │                              within lock_timeout: its holder lives but makes no progress
    ├── GroupInUseError            live members hold a consumer group that was to be reset or deleted
    ├── SettingsMismatchError      (also ValueError) asked-for settings contradict the stored ones
    ├── CorruptStreamError         a stream file cannot be trusted
    │   └── CorruptRecordError     a record inside committed data is damaged (file, position)
    ├── OffsetOutOfRangeError      (also IndexError) the offset was vacuumed or not written yet
    ├── DeserializationError       (also ValueError) a reader's deserializer failed on a stored message
    ├── MessageTooLargeError       (also ValueError) a record over the stream's max_message_bytes
    ├── InvalidNameError           (also ValueError) a group name that is empty or leaves its folder
    ├── InvalidArgumentError       (also ValueError) a setting out of range, a partition that does not exist
    ├── PartialWriteError          (also OSError) push_many committed some of its records, not all
    ├── DiskUsageRefusedError      (also OSError, ENOSPC) the file system is fuller than the producer's
    │                              refuse_writes_above level; nothing was written
    └── ClosedError                (also RuntimeError) the producer or consumer was closed

``OSError`` raised by the disk itself (``ENOSPC``, ``EACCES``, ``EIO``) is not wrapped: it reaches the
caller unchanged, with the stream left consistent.
"""

from __future__ import annotations

import errno
import functools
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._sansio.values import Receipt

__all__ = [
    "ClosedError",
    "CorruptRecordError",
    "CorruptStreamError",
    "DeserializationError",
    "DiskUsageRefusedError",
    "Error",
    "GroupInUseError",
    "InvalidArgumentError",
    "InvalidNameError",
    "LockTimeoutError",
    "MessageKeptError",
    "MessageTooLargeError",
    "MirrorDivergedError",
    "MirrorError",
    "NotAStreamError",
    "OffsetOutOfRangeError",
    "PartialWriteError",
    "SettingsMismatchError",
    "StreamLockedError",
    "StreamNotFoundError",
    "UnsupportedFeatureError",
]


class Error(Exception):
    """Base class of every error adiskq raises on purpose."""


class StreamNotFoundError(Error, FileNotFoundError):
    """No stream exists at the path (readers never create one)."""

    def __init__(self, path: str | os.PathLike[str], why: str = "nothing is there") -> None:
        self.path = os.fspath(path)
        self.why = why
        super().__init__(
            f"no adiskq stream at {self.path!r} ({why}): check the path, or open a Producer there "
            "first to create the stream"
        )

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self) -> tuple[object, ...]:
        return type(self), (self.path, self.why)


class NotAStreamError(Error, ValueError):
    """The path exists but is not an adiskq stream; nothing there was touched."""

    def __init__(self, path: str | os.PathLike[str], why: str) -> None:
        self.path = os.fspath(path)
        self.why = why
        super().__init__(
            f"{self.path!r} is not an adiskq stream ({why}); nothing was changed. "
            "Point adiskq at an empty or missing folder to create a stream"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return type(self), (self.path, self.why)


class StreamLockedError(Error):
    """Other producers hold the stream: an exclusive one (the default) excludes every other, and
    shared ones (``shared=True``) exclude exclusive ones. ``holder`` names them (pid and host)."""

    def __init__(
        self, path: str | os.PathLike[str], holder: str | None = None, *, held_shared: bool | None = None
    ) -> None:
        self.path = os.fspath(path)
        self.holder = holder
        self.held_shared = held_shared  # True: shared producers hold it; False: an exclusive one; None: unknown
        if held_shared:
            who = f"held by shared producers: {holder}" if holder else "held by shared producers"
            what = (
                "Open this producer with shared=True to write beside them, or close them "
                "(or pass lock_timeout= to wait)"
            )
        else:
            who = f"held by {holder}" if holder else "held by another producer"
            what = (
                "Close the other producer, or pass lock_timeout= to wait for it; to let several producers "
                "write at once, open every one of them with shared=True"
            )
        super().__init__(f"stream {self.path!r} is locked ({who}). {what}")

    def __reduce__(self) -> tuple[object, ...]:
        return functools.partial(type(self), held_shared=self.held_shared), (self.path, self.holder)


class LockTimeoutError(StreamLockedError):
    """A lock of the stream's ``locks/`` (shared producers' setup, vacuum, turn or a partition's) was
    not let go within the wait's bound (``lock_timeout``): its holder is alive, since the kernel drops
    a dead process's locks, but it is not progressing — stopped (SIGSTOP, Ctrl-Z, a debugger), frozen
    (a paused container or cgroup) or stuck. ``holder`` names it (pid and host); nothing of the call
    that waited was written unless the call says otherwise (``PartialWriteError``)."""

    def __init__(
        self, path: str | os.PathLike[str], lock: str, waited_seconds: float, holder: str | None = None
    ) -> None:
        self.path = os.fspath(path)
        self.lock = lock
        self.waited_seconds = waited_seconds
        self.holder = holder
        self.held_shared = True
        who = holder or "another process"
        Error.__init__(
            self,
            f"stream {self.path!r}: waited {waited_seconds:g} s for its lock {lock!r}, held by {who}, which is "
            "alive (a process that dies lets go of its locks at once) but is not progressing: it may be "
            "stopped (SIGSTOP, Ctrl-Z, a debugger) or frozen (a paused container). Resume or end that "
            "process (a producer may pass a longer lock_timeout= to wait for it)",
        )

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self) -> tuple[object, ...]:
        return type(self), (self.path, self.lock, self.waited_seconds, self.holder)


class GroupInUseError(Error):
    """Live members hold the consumer group: its offsets cannot be reset, nor the group deleted.

    They would overwrite the new offsets with their own commits. ``holders`` names them (pid and
    host); stop the group's consumers, then try again.
    """

    def __init__(self, name: str, holders: Sequence[str]) -> None:
        self.name = name
        self.holders = tuple(holders)
        super().__init__(
            f"group {name!r} is in use ({', '.join(self.holders) or 'a member'}): its members would overwrite "
            "the new offsets. Stop the group's consumers, then run this again"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return type(self), (self.name, self.holders)


class SettingsMismatchError(Error, ValueError):
    """The settings asked for contradict the settings stored in the stream."""


class CorruptStreamError(Error):
    """A file of the stream holds something adiskq cannot trust."""


class CorruptRecordError(CorruptStreamError):
    """A record inside committed data failed its size, magic or CRC check.

    ``path`` and ``position`` locate the bad bytes; ``offset``, when a reader knows it, is the
    message that cannot be read. Nothing is skipped silently: to read past a damaged message, read
    on from ``offset + 1`` (``Consumer(start=error.offset + 1)``, ``adiskq offsets --reset-to`` for a
    named group); every other message stays readable.
    """

    def __init__(
        self, reason: str, *, path: str | None = None, position: int | None = None, offset: int | None = None
    ) -> None:
        self.reason = reason
        self.path = path
        self.position = position
        self.offset = offset
        super().__init__(self._describe())

    def __reduce__(self) -> tuple[object, ...]:
        return (
            functools.partial(type(self), self.reason, path=self.path, position=self.position, offset=self.offset),
            (),
        )

    def with_path(self, path: str, base_position: int = 0, offset: int | None = None) -> CorruptRecordError:
        """The same error, located in ``path`` with positions counted from ``base_position``."""
        position = None if self.position is None else base_position + self.position
        return CorruptRecordError(self.reason, path=path, position=position, offset=offset)

    def _describe(self) -> str:
        where = self.path or "<buffer>"
        at = "" if self.position is None else f" at byte {self.position}"
        of = "" if self.offset is None else f" (offset {self.offset}; read on from offset {self.offset + 1} to pass it)"
        return f"corrupt record in {where}{at}{of}: {self.reason}. Run `adiskq check` on the stream to list the damage"


class OffsetOutOfRangeError(Error, IndexError):
    """The offset is older than the oldest retained message or newer than the newest."""

    def __init__(
        self,
        message: str,
        *,
        partition: int | None = None,
        offset: int | None = None,
        oldest_offset: int | None = None,
        next_offset: int | None = None,
    ) -> None:
        super().__init__(message)
        self.partition = partition
        self.offset = offset
        self.oldest_offset = oldest_offset
        self.next_offset = next_offset

    def __reduce__(self) -> tuple[object, ...]:
        return functools.partial(
            type(self),
            self.args[0],
            partition=self.partition,
            offset=self.offset,
            oldest_offset=self.oldest_offset,
            next_offset=self.next_offset,
        ), ()


class DeserializationError(Error, ValueError):
    """A reader's ``key_deserializer`` or ``value_deserializer`` failed on a stored message.

    The messages before it were delivered; this one was not, and nothing after it is skipped:
    reading again tries it again (and raises again, unless the function changed its mind).
    ``partition`` and ``offset`` name it, ``__cause__`` is what the function raised. To read past
    it, start after it: ``Consumer(path, partition=p, start=offset + 1)``, or ``group.seek(p,
    offset + 1)`` in a consumer group. The stored bytes are intact: ``adiskq.read(path, p, offset)``.
    """

    def __init__(self, message: str, *, partition: int, offset: int) -> None:
        super().__init__(message)
        self.partition = partition
        self.offset = offset

    def __reduce__(self) -> tuple[object, ...]:
        return _rebuild_deserialization_error, (str(self), self.partition, self.offset)


def _rebuild_deserialization_error(message: str, partition: int, offset: int) -> DeserializationError:
    return DeserializationError(message, partition=partition, offset=offset)


class MessageKeptError(Error, OSError):
    """A consumer group's ``dead_letter()`` or ``retry()`` could not store the message where it had
    to go (the dead-letter stream, the group's retry stream).

    Nothing is lost: the group keeps its commit of the message's partition below the message until
    a later ``dead_letter()`` or ``retry()`` of it succeeds, so if the member stops first, the
    message is delivered again. ``partition`` and ``offset`` name it, ``parameter`` what could not
    be written (``dead_letter_path`` or the retry stream), ``errno`` and ``__cause__`` are the failure's.
    """

    def __init__(self, message: str, *, partition: int, offset: int, parameter: str, errno: int | None = None) -> None:
        super().__init__(message)
        self.partition = partition
        self.offset = offset
        self.parameter = parameter
        self.errno = errno

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self) -> tuple[object, ...]:
        return _rebuild_message_kept_error, (str(self), self.partition, self.offset, self.parameter, self.errno)


def _rebuild_message_kept_error(
    message: str, partition: int, offset: int, parameter: str, errno: int | None
) -> MessageKeptError:
    return MessageKeptError(message, partition=partition, offset=offset, parameter=parameter, errno=errno)


class MessageTooLargeError(Error, ValueError):
    """A message is larger than the stream's ``max_message_bytes``."""


class InvalidNameError(Error, ValueError):
    """A name (of a consumer group) that is empty, hidden, or would leave its folder."""


class InvalidArgumentError(Error, ValueError):
    """An argument out of range: partitions, segment size, retention, a partition the stream lacks."""


class UnsupportedFeatureError(InvalidArgumentError):
    """A feature asked of a backend that does not have it: a local stream's feature on a Kafka
    topic (``kafka://``), or the other way round. Raised when the producer, reader or function is
    made (or opened, where the answer is the cluster's), never in the middle of a stream.

    ``feature`` names what was asked, ``backend`` is ``"local"`` or ``"kafka"``, and ``instead``
    says what to use; ``adiskq.capabilities(path_or_url)`` lists every feature of a backend.
    """

    def __init__(self, feature: str, backend: str, instead: str) -> None:
        self.feature = feature
        self.backend = backend
        self.instead = instead
        where = "a Kafka topic (kafka://)" if backend == "kafka" else "a local stream"
        super().__init__(f"{feature} is not available on {where}: {instead}")

    def __reduce__(self) -> tuple[object, ...]:
        return type(self), (self.feature, self.backend, self.instead)


class PartialWriteError(Error, OSError):
    """A ``push_many`` failed after some of its records were committed.

    Each partition's share is committed on its own, so once one share is visible to readers the call
    cannot be taken back; and an index write that fails part-way keeps the entries readers could
    already see, which cuts a share in two (its first records kept, with contiguous offsets). ``receipts`` has one entry
    per record given: its ``Receipt`` where it was written, ``None`` where it was not. ``errno`` and
    ``__cause__`` are those of the failure; push the records whose receipt is ``None`` again.
    """

    def __init__(self, cause: BaseException, receipts: Sequence[Receipt | None]) -> None:
        self.receipts: list[Receipt | None] = list(receipts)
        written = sum(receipt is not None for receipt in self.receipts)
        code = cause.errno if isinstance(cause, OSError) else None
        message = (
            f"push_many wrote {written} of {len(self.receipts)} records before it failed ({cause}); "
            "the written ones are committed and their receipts are in .receipts (None where a record "
            "was not written): push the unwritten records again once the cause is fixed"
        )
        if code is None:
            super().__init__(message)
        else:
            super().__init__(code, message)

    def __str__(self) -> str:
        return str(self.args[-1])

    def __reduce__(self) -> tuple[object, ...]:
        cause = self.__cause__ if self.__cause__ is not None else OSError(self.errno, self.args[-1])
        return type(self), (cause, self.receipts)


class DiskUsageRefusedError(Error, OSError):
    """A push refused because the stream's file system is fuller than ``refuse_writes_above``.

    RocketMQ's disk warning level: writes stop a little before the disk is full, so one stream
    cannot starve the machine (nor its own vacuum and consumer-group commits) of space. Nothing of
    the refused call was written; ``errno`` is ``ENOSPC``, so code that handles a full disk handles
    this too. Writing resumes by itself once usage is below the level again: free space, let vacuum
    delete old segments (``Retention(max_disk_usage=...)`` below the level), or raise the level.
    """

    def __init__(self, path: str, level: float, used_bytes: int, size_bytes: int) -> None:
        self.path = path
        self.level = level
        self.used_bytes = used_bytes
        self.size_bytes = size_bytes
        self.usage = used_bytes / size_bytes if size_bytes else 1.0
        super().__init__(
            errno.ENOSPC,
            f"writes to stream {path!r} are refused: its file system is {self.usage:.1%} full "
            f"({_size(used_bytes)} of {_size(size_bytes)} used), above the producer's "
            f"refuse_writes_above={level:g}. Nothing was written, and writes resume by themselves once "
            "usage is below the level: free space on that file system, delete old data (producer.vacuum() "
            "with a tighter Retention, a stream Retention(max_disk_usage=...) below the level, or "
            "`adiskq vacuum PATH --max-disk-usage 0.85`), or open the Producer with a higher "
            "refuse_writes_above= (1.0 turns the check off)",
        )

    def __str__(self) -> str:
        return str(self.args[-1])

    def __reduce__(self) -> tuple[object, ...]:
        return type(self), (self.path, self.level, self.used_bytes, self.size_bytes)


def explain_os_error(error: OSError, advice: str) -> None:
    """Append ``advice`` to an ``OSError``'s message, keeping its type, errno and file names: in
    ``str(error)`` (what ``log.error("%s", error)`` prints), not only in a traceback's notes."""
    if error.strerror is None:  # an OSError made without an errno: its message is its args
        error.args = (*error.args[:-1], f"{error.args[-1]}; {advice}") if error.args else (advice,)
    else:
        error.strerror = f"{error.strerror}; {advice}"


def _size(size_bytes: int) -> str:
    """``384.0 KiB``, ``9.5 GiB``: a size as a person reads it."""
    size = float(size_bytes)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size_bytes} bytes" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


class ClosedError(Error, RuntimeError):
    """The object was closed; open a new one."""


class MirrorError(Error):
    """The Kafka mirror cannot go on; the message says why and what to do."""


class MirrorDivergedError(MirrorError):
    """The stream no longer holds what the mirror shipped under an offset (a power cut took back
    records, and new ones took their offsets): shipping on would put other messages in Kafka under
    those positions, so the mirror stops."""

    def __init__(self, message: str, *, partition: int, offset: int) -> None:
        super().__init__(message)
        self.partition = partition
        self.offset = offset
