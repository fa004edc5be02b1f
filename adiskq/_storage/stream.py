"""A stream folder: its settings, its owner lock and its partitions, for writing or for reading.

Opening for writing takes the owner lock *before* anything is created or repaired, refuses any path
that is not a stream (a file, a non-empty folder without ``settings.json``) without touching it, and
recovers every partition's active segment. Opening for reading never writes anything.

Shared writers (``shared=True``): the owner lock is held shared, and every step that changes the
stream's shape runs under a lock of ``locks/`` (``flocks.py``): opening and closing under ``setup``
(creating the stream, growing it, recovering each partition under its own lock, and the clean-close
record, which only the last shared writer to close writes), vacuum under ``vacuum``, appends under
the partition's lock. A shared writer cannot grow the partition count while other writers are open.
Every wait for one of those locks is bounded (``lock_timeout``, ``flocks.lock_wait_seconds``): a
writer that is stopped while it holds one makes the others fail with ``LockTimeoutError`` naming it,
never hang; closing waits at most ``CLOSE_WAIT_SECONDS`` and then skips its clean-close record.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import functools
import logging
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Final

from .._errors import (
    CorruptStreamError,
    InvalidArgumentError,
    LockTimeoutError,
    NotAStreamError,
    SettingsMismatchError,
    StreamLockedError,
    StreamNotFoundError,
    explain_os_error,
)
from .._sansio.naming import (
    LOCKS_DIR,
    OWNER_FILE,
    PARTS_DIR,
    RECOVERY_FILE,
    SETTINGS_FILE,
    WRITERS_DIR,
    parse_partition_dir,
    parse_segment_file,
    partition_dir_name,
)
from .._sansio.retention import DiskUsage, plan_vacuum
from .._sansio.values import RecoveryReport, Retention, SegmentRepair, VacuumReport
from .files import DEFAULT_FILE_MODE, atomic_write_json, dir_mode, fsync_dir, read_json
from .flocks import FileLock, lock_wait_seconds, partition_lock, setup_lock, vacuum_lock
from .lock import OwnerLock
from .log_start import load_log_start, settle_log_start
from .partition_reader import PartitionReader
from .partition_writer import PartitionWriter
from .segment_files import SegmentFileState
from .settings import (
    AskedSettings,
    PartitionCountChange,
    StreamSettings,
    load_settings,
    require_compression,
    save_settings,
)
from .writers import WriterEntry, describe_writers, live_writers

__all__ = [
    "StreamReader",
    "StreamWriter",
    "disk_usage",
    "load_clean_close",
    "load_recovery_report",
]

logger: Final = logging.getLogger("adiskq.producer")

_LOCK_POLL_SECONDS: Final = 0.02
# How long a closing shared writer waits for the setup lock or a partition's before it gives up its
# clean-close record (the next open then checks every active segment: slower, never wrong). Closing
# must not wait on another process for long: that one may be stopped.
CLOSE_WAIT_SECONDS: Final = 1.0


def _is_scratch(name: str) -> bool:
    """Files a crashed stream creation may leave in an otherwise empty folder."""
    return name in (OWNER_FILE, WRITERS_DIR, LOCKS_DIR) or (name.startswith(".") and name.endswith(".tmp"))


def _holds_only_empty_partitions(parts_dir: str) -> bool:
    """True if ``parts/`` holds nothing but partition folders of empty segment files.

    That is all a stream creation that crashed before writing ``settings.json`` can leave (no
    message can be appended before it exists), so such a folder is finished, not refused.
    """
    try:
        with os.scandir(parts_dir) as partitions:
            for partition in partitions:
                if parse_partition_dir(partition.name) is None or not partition.is_dir(follow_symlinks=False):
                    return False
                with os.scandir(partition.path) as files:
                    for file in files:
                        if (
                            parse_segment_file(file.name) is None
                            or not file.is_file(follow_symlinks=False)
                            or file.stat(follow_symlinks=False).st_size
                        ):
                            return False
    except NotADirectoryError:
        return False
    return True


def not_a_folder(path: str) -> str:
    """What is at ``path`` instead of a folder, for the error that refuses it: a file, a symbolic
    link that loops or points nowhere, or another kind of file."""
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        if error.errno == errno.ELOOP:
            return "it is a symbolic link that loops back on itself"
        if error.errno == errno.ENOENT and os.path.islink(path):
            return f"it is a symbolic link to {os.readlink(path)!r}, which does not exist"
        return f"it cannot be looked at: {error.strerror}"
    if stat.S_ISREG(mode):
        return "it is a file"
    kinds = {
        stat.S_IFIFO: "a named pipe",
        stat.S_IFSOCK: "a socket",
        stat.S_IFCHR: "a device",
        stat.S_IFBLK: "a device",
    }
    return f"it is {kinds.get(stat.S_IFMT(mode), 'not a folder')}"


def disk_usage(path: str) -> DiskUsage:
    """The use of the file system holding ``path``, as ``df`` counts it.

    Its size here is what is used plus what this process may still use, so a ratio of 1.0 is where
    writes fail with ENOSPC even where blocks are kept in reserve for root (ext4 keeps 5%, and its
    used / raw size then never passes 0.95). Retention's ``max_disk_usage`` and the producer's
    ``refuse_writes_above`` share this measure, so a vacuum by the one brings usage below the other.
    """
    # os.statvfs as shutil.disk_usage reads it (shutil would bring bz2 and lzma into every producer).
    fs = os.statvfs(path)
    used = (fs.f_blocks - fs.f_bfree) * fs.f_frsize
    return DiskUsage(used + fs.f_bavail * fs.f_frsize, used)


def _read_recovery_file(stream_path: str) -> dict[str, object] | None:
    try:
        data = read_json(os.path.join(stream_path, RECOVERY_FILE))
    except (FileNotFoundError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def load_recovery_report(stream_path: str) -> RecoveryReport | None:
    """The report the last producer open wrote, if any (None if missing or unreadable)."""
    data = _read_recovery_file(stream_path)
    if data is None:
        return None
    try:
        raw_repairs = data.get("repairs", [])
        raw_clean = data.get("clean_partitions", [])
        repairs = tuple(
            SegmentRepair(int(r["partition"]), int(r["segment"]), str(r["action"]), r.get("position"))
            for r in (raw_repairs if isinstance(raw_repairs, list) else [])
            if isinstance(r, dict)
        )
        clean = tuple(int(p) for p in (raw_clean if isinstance(raw_clean, list) else []))
        return RecoveryReport(int(data.get("timestamp_ns", 0)), repairs, clean)  # type: ignore[call-overload]
    except (KeyError, TypeError, ValueError):
        return None


def load_clean_close(stream_path: str) -> dict[int, SegmentFileState]:
    """Partition -> its active segment's files as the last producer's clean close left them.

    Empty when the last producer did not close cleanly (the record is removed on every open).
    """
    data = _read_recovery_file(stream_path)
    raw = data.get("clean_close") if data is not None else None
    if not isinstance(raw, dict):
        return {}
    states: dict[int, SegmentFileState] = {}
    for partition, state in raw.items():
        try:
            keys = state.get("keyindex_file")
            tags = state.get("tagindex_file")  # absent in a record written before tags: never trusted
            states[int(partition)] = SegmentFileState(
                int(state["base_offset"]),
                (int(state["data_file"][0]), int(state["data_file"][1])),
                (int(state["index_file"][0]), int(state["index_file"][1])),
                (int(state["timeindex_file"][0]), int(state["timeindex_file"][1])),
                None if keys is None else (int(keys[0]), int(keys[1])),
                None if tags is None else (int(tags[0]), int(tags[1])),
            )
        except (AttributeError, KeyError, TypeError, ValueError, IndexError):
            continue  # a damaged entry only costs that partition its full check
    return states


def _save_recovery_file(
    stream_path: str, report: RecoveryReport, clean_close: dict[int, SegmentFileState] | None, mode: int
) -> None:
    value: dict[str, object] = {
        "timestamp_ns": report.timestamp_ns,
        "repairs": [dataclasses.asdict(r) for r in report.repairs],
        "clean_partitions": list(report.clean_partitions),
    }
    if clean_close is not None:
        value["clean_close"] = {str(p): state._asdict() for p, state in sorted(clean_close.items())}
    atomic_write_json(os.path.join(stream_path, RECOVERY_FILE), value, mode=mode)


class StreamWriter:
    """A stream opened by a producer: settings, lock held (exclusive or shared), partitions recovered."""

    def __init__(
        self,
        path: str,
        settings: StreamSettings,
        lock: OwnerLock,
        partitions: list[PartitionWriter],
        recovery: RecoveryReport,
        mode: int,
    ) -> None:
        self.path = path
        self.settings = settings
        self._lock = lock
        self.partitions = partitions
        self.recovery = recovery
        self.mode = mode
        self.closed = False
        self.shared = lock.shared
        self._entry: WriterEntry | None = None
        self._setup_lock = setup_lock(path, mode)
        self._vacuum_lock = vacuum_lock(path, mode)
        self.lock_wait_seconds = lock_wait_seconds(0.0)  # set by open() from its lock_timeout

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        partitions: int | None = None,
        segment_size_bytes: int | None = None,
        retention: Retention | None = None,
        max_message_bytes: int | None = None,
        key_index: bool | None = None,
        mode: int = DEFAULT_FILE_MODE,
        lock_timeout: float = 0.0,
        trust_clean_close: bool = True,
        shared: bool = False,
        interrupt: threading.Event | None = None,
        shared_lock_timeout: float | None = None,
        compression: str | None = None,
        park_partitions: bool = False,
    ) -> StreamWriter:
        """Open (or create) the stream for writing; blocks up to ``lock_timeout`` for the lock.

        ``shared=True`` writes beside other shared writers (appends then go through
        ``appending``); ``False`` is the one writer. A shared writer waits for the locks of
        ``locks/`` up to ``lock_timeout`` too (``SHARED_LOCK_TIMEOUT_SECONDS`` for 0), then raises
        ``LockTimeoutError`` (``shared_lock_timeout``, when given, bounds those waits instead: for
        a caller that waits for the owner lock itself); setting ``interrupt`` ends such a wait at
        once (``InterruptedError``).

        ``trust_clean_close=False`` checks every active segment record by record even where the
        last producer's clean close says its files are unchanged (a repair looking for bit rot).

        ``park_partitions=True`` parks each partition (``PartitionWriter.park``: its files fsynced
        and closed, its position kept) as soon as it is open, so a stream of more partitions than
        the process may keep files open for is opened, or created, one partition's files at a time;
        the writer then unparks a partition before it writes it. Exclusive writers only.
        """
        if park_partitions and shared:
            raise InvalidArgumentError(
                "park_partitions=True is for the stream's one writer: a shared writer's partitions are "
                "followed under their locks and stay open; open it with shared=False"
            )
        path = os.path.abspath(os.fspath(path))
        wait_seconds = lock_wait_seconds(lock_timeout if shared_lock_timeout is None else shared_lock_timeout)
        asked = AskedSettings(partitions, segment_size_bytes, retention, max_message_bytes, key_index, compression)
        # Bad arguments are refused before anything on disk is created or touched.
        asked.applied_to(StreamSettings())
        if os.path.lexists(path) and not os.path.isdir(path):
            raise NotAStreamError(path, f"{not_a_folder(path)}, not a folder")
        if not os.path.exists(path):
            os.makedirs(path, mode=dir_mode(mode), exist_ok=True)
            fsync_dir(os.path.dirname(path))
        cls._refuse_foreign_folder(path)

        lock = OwnerLock(path, mode=mode, shared=shared)
        deadline = time.monotonic() + lock_timeout
        try:
            while not lock.try_acquire():
                if time.monotonic() >= deadline:
                    holder, held_shared = lock.holder()
                    raise StreamLockedError(path, holder, held_shared=held_shared)
                time.sleep(_LOCK_POLL_SECONDS)
            entry = WriterEntry(path, lock.id, shared=shared, mode=mode)
            try:
                live_writers(path, remove_dead=True)  # what dead producers left goes
                entry.register()
                if shared:
                    writer = cls._open_shared(path, lock, asked, mode, trust_clean_close, wait_seconds, interrupt)
                else:
                    writer = cls._open_locked(path, lock, asked, mode, trust_clean_close, park=park_partitions)
            except BaseException:
                entry.unregister()
                lock.release()
                raise
            writer._entry = entry
            writer.lock_wait_seconds = wait_seconds
            return writer
        except PermissionError as error:
            explain_os_error(
                error,
                "adiskq: a producer needs write permission on the stream's folder and files "
                "(readers and consumers need only read permission); nothing was changed",
            )
            raise

    @staticmethod
    def _refuse_foreign_folder(path: str) -> None:
        settings = os.path.join(path, SETTINGS_FILE)
        if os.path.lexists(settings):
            load_settings(path)  # raises NotAStreamError / CorruptStreamError with the reason
            return
        others = sorted(name for name in os.listdir(path) if not _is_scratch(name))
        if others == [PARTS_DIR] and _holds_only_empty_partitions(os.path.join(path, PARTS_DIR)):
            return  # a stream whose creation crashed before settings.json was written: finish it
        if others and os.path.lexists(settings):
            # Another process created the stream while this one looked (several shared producers
            # opening a new stream at once): settings.json, written last and before any message,
            # is there now, and what was seen was that creation under way.
            load_settings(path)
            return
        if others:
            shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
            raise NotAStreamError(path, f"the folder holds {shown} but no settings.json")

    @classmethod
    def _open_shared(
        cls,
        path: str,
        lock: OwnerLock,
        asked: AskedSettings,
        mode: int,
        trust_clean_close: bool,
        wait_seconds: float,
        interrupt: threading.Event | None,
    ) -> StreamWriter:
        """Open beside other shared writers: under the setup and vacuum locks (no other writer
        opens, closes or vacuums meanwhile), each partition recovered under its own lock; every
        wait for a lock ends ``wait_seconds`` after the first began."""
        setup, vacuum = setup_lock(path, mode), vacuum_lock(path, mode)
        deadline = time.monotonic() + wait_seconds

        def take(held: FileLock) -> None:
            try:
                held.acquire(max(0.0, deadline - time.monotonic()), interrupt=interrupt)
            except LockTimeoutError as error:
                raise held.timeout_error(wait_seconds) from error.__cause__

        try:
            take(setup)
            take(vacuum)
            return cls._open_locked(path, lock, asked, mode, trust_clean_close, take)
        finally:
            vacuum.close()
            setup.close()

    @classmethod
    def _open_locked(
        cls,
        path: str,
        lock: OwnerLock,
        asked: AskedSettings,
        mode: int,
        trust_clean_close: bool,
        take: Callable[[FileLock], None] | None = None,
        *,
        park: bool = False,
    ) -> StreamWriter:
        # Settings again, now that no other producer can change them.
        cls._refuse_foreign_folder(path)
        stored = load_settings(path)
        base = require_compression(stored, asked, path) or stored or StreamSettings()
        partitions = asked.partition_count
        if stored is not None and partitions is not None and partitions < stored.partition_count:
            raise SettingsMismatchError(
                f"stream {path!r} has {stored.partition_count} partitions and partitions={partitions} asks for "
                f"fewer; a stream cannot lose partitions "
                f"(keys would move), so open it with partitions={stored.partition_count} or more, or leave "
                "partitions unset"
            )
        settings = asked.applied_to(base)
        if lock.shared and stored is not None and settings.partition_count > stored.partition_count:
            others = [w for w in live_writers(path) if w.id != lock.id]
            if others:
                raise SettingsMismatchError(
                    f"stream {path!r} has {stored.partition_count} partitions and partitions={partitions} asks "
                    f"for more, but other producers write it now ({describe_writers(others)}): keys would be "
                    "placed on different partitions by each. Grow it while no other producer is open, or "
                    "leave partitions unset"
                )

        parts_dir = os.path.join(path, PARTS_DIR)
        if os.path.lexists(parts_dir) and not os.path.isdir(parts_dir):
            raise CorruptStreamError(f"{parts_dir} should be the partitions' folder but is not a folder; move it away")
        if not os.path.isdir(parts_dir):
            os.mkdir(parts_dir, dir_mode(mode))
            fsync_dir(path)
        clean_close = load_clean_close(path) if trust_clean_close else {}
        opened: list[PartitionWriter] = []
        repairs: list[SegmentRepair] = []
        try:
            # Partitions exist before settings.json counts them, so a reader never misses one.
            for number in range(settings.partition_count):
                # A shared writer recovers a partition under its lock: others may be appending.
                held = partition_lock(path, number, mode) if lock.shared else None
                try:
                    if held is not None:
                        assert take is not None
                        take(held)
                    writer, repaired = PartitionWriter.open(
                        os.path.join(parts_dir, partition_dir_name(number)),
                        number,
                        segment_size_bytes=settings.segment_size_bytes,
                        mode=mode,
                        clean=clean_close.get(number),
                        key_index=settings.key_index,
                        compact=settings.compact_segments,
                    )
                except BaseException:
                    if held is not None:
                        held.close()
                    raise
                if held is not None:
                    held.release()
                    writer.lock = held
                opened.append(writer)
                repairs.extend(repaired)
                settled = settle_log_start(writer.directory, writer.next_offset, mode=mode)
                if settled is not None:
                    repairs.append(SegmentRepair(number, writer.active.base_offset, settled))
                if park:
                    # Nothing written since its files were made durable (created, recovered, or
                    # as a clean close left them): no fsync.
                    writer.park(sync=False)
            if stored is not None and settings.partition_count > stored.partition_count:
                # Keys move when the count grows: remember where the old placement ends, so a
                # lookup by key finds the messages placed before.
                change = PartitionCountChange(
                    stored.partition_count, tuple(w.next_offset for w in opened[: stored.partition_count])
                )
                settings = dataclasses.replace(settings, partition_history=(*stored.partition_history, change))
            if settings != stored:
                save_settings(path, settings, mode=mode)
        except BaseException:
            for writer in opened:
                writer.close()
                if writer.lock is not None:
                    writer.lock.close()
            raise
        report = RecoveryReport(time.time_ns(), tuple(repairs), tuple(w.partition for w in opened if w.scan_skipped))
        # Replacing the file also drops the clean-close record before anything is appended, so a
        # crash of this producer is never taken for a clean close. (Sizes and modification times
        # would give a crash away anyway; this makes it certain.)
        try:
            _save_recovery_file(path, report, None, mode)
        except OSError:
            with contextlib.suppress(OSError):  # the report is a courtesy; a full disk must not stop us
                os.unlink(os.path.join(path, RECOVERY_FILE))
        return cls(path, settings, lock, opened, report, mode)

    # -- operations ------------------------------------------------------------------------------

    def plan_vacuum(self, retention: Retention | None = None, now_ns: int | None = None) -> list[tuple[int, int]]:
        """(partition, base offset) of every segment a vacuum would delete now."""
        retention = retention or self.settings.retention
        log_starts = {p.partition: load_log_start(p.directory) for p in self.partitions}
        if retention.is_unbounded and not any(log_starts.values()):
            return []
        infos = {p.partition: p.segment_infos() for p in self.partitions}
        disk = disk_usage(self.path) if retention.max_disk_usage is not None else None
        now = time.time_ns() if now_ns is None else now_ns
        doomed = plan_vacuum(infos, retention, now, disk, log_starts)
        return [(s.partition, s.base_offset) for s in doomed]

    def delete_segments(self, segments: Sequence[tuple[int, int]]) -> VacuumReport:
        """Delete these sealed segments."""
        by_partition: dict[int, list[int]] = {}
        for partition, base in segments:
            by_partition.setdefault(partition, []).append(base)
        report = VacuumReport()
        for partition, bases in sorted(by_partition.items()):
            report = report.merged(self.partitions[partition].delete_segments(bases))
        return report

    def vacuum(self, retention: Retention | None = None, now_ns: int | None = None) -> VacuumReport:
        """Delete what the retention (the stream's own by default) no longer keeps.

        A shared writer vacuums only if no other one is vacuuming now (else it reports nothing
        removed: that one does the work), and first re-reads which segments are sealed.
        """
        if not self.shared:
            return self.delete_segments(self.plan_vacuum(retention, now_ns))
        if not self._vacuum_lock.try_acquire():
            return VacuumReport()
        try:
            for partition in self.partitions:
                partition.rescan_sealed()
            return self.delete_segments(self.plan_vacuum(retention, now_ns))
        finally:
            self._vacuum_lock.release()

    @contextlib.contextmanager
    def vacuuming(self) -> Iterator[None]:
        """Hold the vacuum lock (a shared writer; waiting for another vacuum to end), with the
        sealed segments re-read, while the caller plans and deletes; an exclusive writer takes none."""
        if not self.shared:
            yield
            return
        self._vacuum_lock.acquire(self.lock_wait_seconds)
        with self._vacuum_lock:
            for partition in self.partitions:
                partition.rescan_sealed()
            yield

    @contextlib.contextmanager
    def appending(self, partitions: Iterable[int]) -> Iterator[None]:
        """Hold these partitions' locks (taken in ascending order), each view brought up to date,
        while the caller appends through ``self.partitions[n].append``. An exclusive writer needs
        no lock and takes none."""
        taken: list[PartitionWriter] = []
        deadline = time.monotonic() + self.lock_wait_seconds
        try:
            for number in sorted(set(partitions)):
                partition = self.partitions[number]
                if partition.lock is None:
                    continue
                try:
                    partition.lock.acquire(max(0.0, deadline - time.monotonic()))
                except LockTimeoutError as error:
                    raise partition.lock.timeout_error(self.lock_wait_seconds) from error.__cause__
                taken.append(partition)
                partition.refresh()
            yield
        finally:
            for partition in reversed(taken):
                partition.let_go()

    def sync(self) -> None:
        """fsync every partition's active segment."""
        for partition in self.partitions:
            partition.sync()

    def close(self, *, sync: bool = True) -> None:
        """Sync (by default), close every file and release the lock; closing twice is harmless."""
        if self.closed:
            return
        self.closed = True
        try:
            if self.shared:
                self._close_shared(sync)
            elif sync:
                for partition in self.partitions:
                    # Best effort: a time or key index left short is rebuilt by the next open;
                    # the fsync of the data must happen regardless.
                    with contextlib.suppress(OSError):
                        partition.flush_buffered_entries()
                self.sync()
                # Only now, with every file fsynced, may the next producer skip its check.
                with contextlib.suppress(OSError):
                    states = {p.partition: p.file_state() for p in self.partitions}
                    _save_recovery_file(self.path, self.recovery, states, self.mode)
        finally:
            for partition in self.partitions:
                partition.close()
                if partition.lock is not None:
                    partition.lock.close()
            self._setup_lock.close()
            self._vacuum_lock.close()
            if self._entry is not None:
                self._entry.unregister()
            self._lock.release()

    def _close_shared(self, sync: bool) -> None:
        """Let go of every partition (its buffered entries written) and fsync; the last shared
        writer to close also records the clean close, under the setup lock (no writer opens
        meanwhile), each partition's view brought up to date under its lock first."""
        for partition in self.partitions:
            partition.let_go()
        if not sync:
            return
        try:
            self._setup_lock.acquire(CLOSE_WAIT_SECONDS)
        except LockTimeoutError as error:
            # Another writer opens or closes, and takes long (it may be stopped): no clean-close record.
            logger.warning("adiskq: closing without a clean-close record: %s", error)
            self.sync()
            return
        with self._setup_lock:
            last = not [w for w in live_writers(self.path) if self._entry is None or w.id != self._entry.id]
            if not last:
                self.sync()
                return
            states: dict[int, SegmentFileState] = {}
            try:
                for partition in self.partitions:
                    assert partition.lock is not None
                    partition.lock.acquire(CLOSE_WAIT_SECONDS)
                    with partition.lock:
                        partition.refresh()
                        partition.sync()
                        states[partition.partition] = partition.file_state()
            except (OSError, ValueError, LockTimeoutError):
                self.sync()
                return  # no clean-close record: the next open checks every active segment
            with contextlib.suppress(OSError):
                _save_recovery_file(self.path, self.recovery, states, self.mode)


class StreamReader:
    """A stream opened for reading: validated settings and partition readers; writes nothing."""

    def __init__(self, path: str, settings: StreamSettings) -> None:
        self.path = path
        self.settings = settings

    @functools.cached_property
    def real_path(self) -> str:
        """The stream's path with symlinks resolved: the name producers and consumers of one
        process agree on for in-process wake-ups, however each was given the path."""
        return os.path.realpath(self.path)

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> StreamReader:
        """The stream at ``path``; StreamNotFoundError if there is none (nothing is created)."""
        path = os.path.abspath(os.fspath(path))
        if not os.path.lexists(path):
            raise StreamNotFoundError(path)
        if not os.path.isdir(path):
            raise StreamNotFoundError(path, f"{not_a_folder(path)}, not a stream folder")
        try:
            settings = load_settings(path)
        except NotAStreamError as error:
            raise StreamNotFoundError(path, str(error)) from None
        if settings is None:
            raise StreamNotFoundError(path, "the folder has no settings.json")
        return cls(path, settings)

    def refresh(self) -> StreamSettings:
        """Re-read the settings (a producer may have added partitions)."""
        settings = load_settings(self.path)
        if settings is not None:
            self.settings = settings
        return self.settings

    @property
    def partition_count(self) -> int:
        """Partitions, as of the last read of the settings."""
        return self.settings.partition_count

    def partition_dir(self, partition: int) -> str:
        """The folder of one partition."""
        return os.path.join(self.path, PARTS_DIR, partition_dir_name(partition))

    def partition(self, partition: int) -> PartitionReader:
        """A reader of one partition; InvalidArgumentError for a partition the stream does not have."""
        if isinstance(partition, int) and partition >= self.partition_count:
            self.refresh()  # it may have been added since we looked
        if not isinstance(partition, int) or isinstance(partition, bool) or not 0 <= partition < self.partition_count:
            raise InvalidArgumentError(
                f"stream {self.path!r} has partitions 0..{self.partition_count - 1}; "
                f"there is no partition {partition!r}"
            )
        return PartitionReader(self.partition_dir(partition), partition)
