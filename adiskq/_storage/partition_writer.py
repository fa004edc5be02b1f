"""The producer's side of a partition: open (with recovery), append, roll, sync and vacuum.

Segments are found by their ``.index`` file; files that are not segment files are ignored. The last
segment is the active one; all others are sealed (fsynced and closed when the next was created).
Vacuum deletes a segment's ``.index`` first, so a crash in the middle of a vacuum leaves only
sealed files without an index at the old end of the partition, which the next open removes.

When the stream keeps a key index, a roll seals the old segment's ``.keyindex`` (``keyindex.py``)
after fsyncing its data and before creating the next segment, so every segment a reader sees
before the last has a sealed key index (or, if the index was off then, none). Opening the partition
rebuilds a sealed key index that is missing or malformed.

Shared producers (``lock`` set: the partition's ``flock``, ``flocks.py``) append only while they hold
the lock, and first bring their view up to date (``refresh_quick``, else ``refresh``): other
producers may have appended, rolled to a new segment, or died mid-append since. The files say all of
it: the active segment's ``.index`` size and last entry against ``.data``'s size (a torn tail, or a
missing time or key index entry, sends the segment through recovery's rules), and a segment named
by the next offset (a roll: the old one was sealed before the new one existed). Rolls are made by
whoever holds the lock; the others follow.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections.abc import Sequence

from .._errors import CorruptStreamError, InvalidArgumentError
from .._sansio import keyindex as keyindex_format
from .._sansio.codec import DEFAULT_MAX_RECORD_BYTES
from .._sansio.entries import EncodedRun
from .._sansio.naming import DATA, INDEX, KEYINDEX, SEGMENT_EXTENSIONS, TAGINDEX, TIMEINDEX, TXNINDEX
from .._sansio.retention import SegmentInfo
from .._sansio.values import SegmentRepair, VacuumReport
from .files import DEFAULT_FILE_MODE, dir_mode, fsync_dir, read_file
from .flocks import FileLock
from .recovery import ensure_sealed_key_index, recover_segment
from .segment_files import (
    SegmentFileState,
    entry_count,
    file_size,
    list_segment_files,
    record_timestamps,
    segment_path,
    timestamps,
)
from .segment_writer import SegmentWriter

__all__ = ["PartitionWriter"]

logger = logging.getLogger("adiskq.producer")


@dataclasses.dataclass(slots=True)
class _SealedSegment:
    base_offset: int
    next_offset: int
    size_bytes: int
    newest_timestamp_ns: int | None = None
    newest_known: bool = False


class PartitionWriter:
    """The producer's side of a partition: append, roll, sync and vacuum."""

    def __init__(
        self,
        directory: str,
        partition: int,
        sealed: list[_SealedSegment],
        active: SegmentWriter,
        *,
        segment_size_bytes: int,
        mode: int,
        key_index: bool = True,
        compact: bool = False,
        scan_skipped: bool = False,
        lock: FileLock | None = None,
    ) -> None:
        self.directory = directory
        self.partition = partition
        self.segment_size_bytes = segment_size_bytes
        self.mode = mode
        self.key_index = key_index
        # Compact segments (a compressed stream's): no .timeindex, a .tagindex once a message has a tag.
        self.compact = compact
        self._sealed = sealed
        self.active = active
        # True when open() trusted a clean close instead of re-checking the active segment.
        self.scan_skipped = scan_skipped
        # Shared producers: the partition's lock, held around every append (None: an exclusive producer).
        self.lock = lock
        self.max_record_bytes = DEFAULT_MAX_RECORD_BYTES
        self._newest_base = active.base_offset  # the newest segment on disk, as vacuum last saw it

    @classmethod
    def open(
        cls,
        directory: str,
        partition: int,
        *,
        segment_size_bytes: int,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        mode: int = DEFAULT_FILE_MODE,
        clean: SegmentFileState | None = None,
        key_index: bool = True,
        compact: bool = False,
    ) -> tuple[PartitionWriter, list[SegmentRepair]]:
        """Open (creating it if missing) and recover the partition; returns it and its repairs.

        ``clean`` is the active segment's state as the last producer's clean close recorded it: if
        the files are exactly so (same sizes and modification times), the check of every record is
        skipped, because nothing has written to them since they were fsynced. ``key_index`` keeps
        a key index: missing or malformed ones of sealed segments are rebuilt here. ``compact``
        segments keep no ``.timeindex`` and a ``.tagindex`` only once a message has a tag.
        """
        _ensure_folder(directory, partition, mode)
        files = list_segment_files(directory)
        repairs = _remove_vacuum_leftovers(directory, partition, files)
        bases = sorted(files)
        sealed: list[_SealedSegment] = []
        for base in bases[:-1]:
            repairs += _check_sealed(
                directory, partition, base, files[base], max_record_bytes, mode, key_index, compact=compact
            )
            sealed.append(cls._describe_sealed(directory, base))
        if bases:
            active, skipped, rebuilt = _open_active(
                directory,
                partition,
                bases[-1],
                clean,
                max_record_bytes=max_record_bytes,
                mode=mode,
                key_index=key_index,
                compact=compact,
            )
            repairs += rebuilt
        else:
            active = SegmentWriter.create(directory, 0, mode=mode, key_index=key_index, compact=compact)
            skipped = False
        writer = cls(
            directory,
            partition,
            sealed,
            active,
            segment_size_bytes=segment_size_bytes,
            mode=mode,
            key_index=key_index,
            compact=compact,
            scan_skipped=skipped,
        )
        return writer, repairs

    @staticmethod
    def _describe_sealed(directory: str, base: int) -> _SealedSegment:
        entries = entry_count(directory, base)
        size = sum(file_size(segment_path(directory, base, extension)) for extension in SEGMENT_EXTENSIONS)
        return _SealedSegment(base, base + entries, size)

    # -- state -----------------------------------------------------------------------------------

    @property
    def next_offset(self) -> int:
        """The offset the next message will get."""
        return self.active.next_offset

    @property
    def oldest_offset(self) -> int:
        """The oldest offset still stored."""
        return self._sealed[0].base_offset if self._sealed else self.active.base_offset

    @property
    def segment_count(self) -> int:
        """Segments on disk, the active one included."""
        return len(self._sealed) + 1

    # -- writing ---------------------------------------------------------------------------------

    def needs_roll(self) -> bool:
        """True when the active segment is full and the next write should start a new one."""
        return self.active.data_size >= self.segment_size_bytes and self.active.message_count > 0

    def roll(self) -> None:
        """Seal the active segment (fsync, seal its key index, close) and start a new one at the
        next offset.

        The fsync comes first so a sealed segment never has a torn tail: recovery then only has
        to check the last segment. The key index is sealed before the next segment exists, so
        readers find every segment but the last with a sealed key index. An empty active segment
        is not rolled: the new segment would have the same name.
        """
        old = self.active
        if old.message_count == 0:
            return
        old.flush_buffered_entries()
        old.sync()
        old.seal_key_index()
        new = SegmentWriter.create(
            self.directory, old.next_offset, mode=self.mode, key_index=self.key_index, compact=self.compact
        )
        old.close()
        self._sealed.append(_SealedSegment(old.base_offset, old.next_offset, self._sealed_size(old.base_offset)))
        self.active = new

    def _sealed_size(self, base: int) -> int:
        return sum(file_size(segment_path(self.directory, base, extension)) for extension in SEGMENT_EXTENSIONS)

    def append(
        self,
        records: Sequence[bytes],
        timestamps: Sequence[int],
        key_hashes: Sequence[int] | bytes | None = None,
        tagindex: bytes | None = None,
    ) -> int:
        """Append and commit a batch (rolling first if the active segment is full)."""
        if self.needs_roll():
            self.roll()
        return self.active.append(records, timestamps, key_hashes, tagindex)

    def append_run(self, run: EncodedRun) -> int:
        """``append`` of an ``EncodedRun`` (``SegmentWriter.write_run``)."""
        if self.needs_roll():
            self.roll()
        return self.active.append_run(run)

    def sync(self, *, data_only: bool = False) -> None:
        """fsync the active segment's files (``data_only``: its ``.data`` alone)."""
        self.active.sync(data_only=data_only)

    def flush_buffered_entries(self) -> None:
        """Write the time and key index entries single pushes left buffered (before a clean close)."""
        self.active.flush_buffered_entries()

    def file_state(self) -> SegmentFileState:
        """The active segment's file sizes and times, for the clean-close record (sync first)."""
        return self.active.file_state()

    def close(self) -> None:
        """Close the active segment's files (callers sync first if they want durability)."""
        self.active.close()

    @property
    def parked(self) -> bool:
        """True while the active segment's files are closed by ``park``."""
        return self.active.parked

    def park(self, *, sync: bool = True) -> None:
        """Fsync and close the active segment's files, keeping the partition's position (an
        exclusive writer of more partitions than it keeps files open for parks the idle ones);
        ``unpark`` before the next write. ``sync=False``: nothing was written since the files
        were last fsynced (``SegmentWriter.park``)."""
        if self.lock is not None:
            raise InvalidArgumentError("a shared producer's partition is not parked: it is followed under its lock")
        self.active.park(sync=sync)

    def unpark(self) -> None:
        """Open the parked active segment's files again (cheap: no scan)."""
        self.active.unpark()

    # -- shared appends --------------------------------------------------------------------------

    def refresh_quick(self) -> bool:
        """Under the partition's lock: take in what other producers appended, if the files agree
        and nobody rolled; False when ``refresh`` must look further (a roll, a torn tail)."""
        active = self.active
        state = active.tail_state()
        if state is None:
            return False
        next_offset, data_size = state
        if next_offset > active.base_offset and os.path.lexists(segment_path(self.directory, next_offset, DATA)):
            return False  # another producer rolled
        active.adopt(next_offset, data_size)
        return True

    def refresh(self) -> list[SegmentRepair]:
        """Under the partition's lock: bring the view up to date, following rolls and repairing a
        tail a dead producer left (recovery's rules), before appending. Returns the repairs."""
        if self.refresh_quick():
            return []
        files = list_segment_files(self.directory)
        bases = sorted(files)
        last = bases[-1] if bases else self.active.base_offset
        if last != self.active.base_offset:
            known = {segment.base_offset: segment for segment in self._sealed}
            if self.active.base_offset not in known:
                known[self.active.base_offset] = self._describe_sealed(self.directory, self.active.base_offset)
            self._sealed = [known.get(base) or self._describe_sealed(self.directory, base) for base in bases[:-1]]
        self.active.close()
        repairs: list[SegmentRepair] = []
        opened: SegmentWriter | None
        try:
            opened = SegmentWriter.open(
                self.directory,
                last,
                next_offset=last,
                data_size=0,
                key_index=self.key_index,
                mode=self.mode,
                compact=self.compact,
            )
        except FileNotFoundError:  # a roll that died before creating all the files
            opened = None
        state = None if opened is None else opened.tail_state()
        if opened is not None and state is not None:
            opened.adopt(*state)
            writer = opened
        else:
            if opened is not None:
                opened.close()
            recovered, repairs = recover_segment(
                self.directory,
                self.partition,
                last,
                max_record_bytes=self.max_record_bytes,
                mode=self.mode,
                key_index=self.key_index,
                compact=self.compact,
            )
            writer = SegmentWriter.open(
                self.directory,
                last,
                next_offset=recovered.next_offset,
                data_size=recovered.data_size,
                key_index=self.key_index,
                mode=self.mode,
                compact=self.compact,
            )
        self.active = writer
        self._newest_base = max(self._newest_base, last)
        return repairs

    def let_go(self) -> None:
        """Write the buffered time and key index entries, then release the partition's lock (a
        shared producer holds no buffered entry while it does not hold the lock)."""
        lock = self.lock
        if lock is None or not lock.held:
            return
        try:
            self.active.flush_buffered_entries()
        except (OSError, ValueError) as error:
            # The files are then short of those entries: the next holder's tail check sees it and
            # recovery rebuilds them from the data. Nothing committed is lost.
            self.active.drop_buffered_entries()
            logger.warning(
                "partition %d: time and key index entries not written (%s); rebuilt later", self.partition, error
            )
        finally:
            lock.release()

    def rescan_sealed(self) -> None:
        """Re-read the sealed segments from the folder (other producers roll and vacuum): every
        segment but the newest, which may be another producer's active one."""
        bases = sorted(list_segment_files(self.directory))
        if not bases:
            return
        known = {segment.base_offset: segment for segment in self._sealed}
        self._sealed = [known.get(base) or self._describe_sealed(self.directory, base) for base in bases[:-1]]
        self._newest_base = bases[-1]

    # -- vacuum ----------------------------------------------------------------------------------

    def segment_infos(self) -> list[SegmentInfo]:
        """Every segment, oldest first, the active one last, as vacuum planning sees them."""
        infos = []
        for segment in self._sealed:
            if not segment.newest_known:
                segment.newest_timestamp_ns = self._newest_timestamp(segment.base_offset)
                segment.newest_known = True
            infos.append(
                SegmentInfo(
                    self.partition,
                    segment.base_offset,
                    segment.next_offset,
                    segment.size_bytes,
                    segment.newest_timestamp_ns,
                )
            )
        active = self.active
        newest = max(self._newest_base, active.base_offset)
        if newest == active.base_offset:
            infos.append(SegmentInfo(self.partition, active.base_offset, active.next_offset, active.data_size, None))
        else:  # a shared producer's stale view: the newest segment is another producer's active one
            size = file_size(segment_path(self.directory, newest, DATA))
            infos.append(SegmentInfo(self.partition, newest, newest + entry_count(self.directory, newest), size, None))
        return infos

    def _newest_timestamp(self, base: int) -> int | None:
        raw = read_file(segment_path(self.directory, base, TIMEINDEX))  # a sealed segment's: complete
        stamps: Sequence[int]
        if raw is None:  # a compact segment: the records hold the timestamps
            stamps = record_timestamps(self.directory, base, 0, entry_count(self.directory, base))
        else:
            stamps = timestamps(raw)
        return max(stamps) if stamps else None

    def delete_segments(self, bases: Sequence[int]) -> VacuumReport:
        """Delete these sealed segments (oldest first; never the active one)."""
        doomed = set(bases)
        if max(self._newest_base, self.active.base_offset) in doomed:
            raise InvalidArgumentError("the active segment is never deleted")
        removed: list[tuple[int, int]] = []
        messages = size = 0
        keep: list[_SealedSegment] = []
        for segment in self._sealed:
            if segment.base_offset not in doomed:
                keep.append(segment)
                continue
            # .index first: readers find segments by it, and recovery finishes what this starts.
            for extension in (INDEX, KEYINDEX, TAGINDEX, TXNINDEX, TIMEINDEX, DATA):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(segment_path(self.directory, segment.base_offset, extension))
            removed.append((self.partition, segment.base_offset))
            messages += segment.next_offset - segment.base_offset
            size += segment.size_bytes
        self._sealed = keep
        if removed:
            fsync_dir(self.directory)
        return VacuumReport(tuple(removed), messages, size)


def _ensure_folder(directory: str, partition: int, mode: int) -> None:
    """The partition's folder, created if missing; a link or a file in its place is refused."""
    if os.path.islink(directory):
        raise CorruptStreamError(
            f"{directory} should be partition {partition}'s folder but is a symbolic link: adiskq "
            "never writes through links inside a stream; replace it with the real folder"
        )
    if os.path.lexists(directory) and not os.path.isdir(directory):
        raise CorruptStreamError(
            f"{directory} should be partition {partition}'s folder but is not a folder; "
            "move it away (nothing was changed)"
        )
    if not os.path.isdir(directory):
        os.mkdir(directory, dir_mode(mode))
        fsync_dir(os.path.dirname(directory))


def _remove_vacuum_leftovers(directory: str, partition: int, files: dict[int, set[str]]) -> list[SegmentRepair]:
    """Remove (from the folder and from ``files``) the oldest segments' files an interrupted vacuum
    left without their data, and refuse a sealed segment that lost its data otherwise.

    Vacuum deletes .index, .keyindex, .tagindex, .txnindex, .timeindex, then .data. A crash in between leaves the oldest
    segments without some of them. Leftovers without .data hold nothing and go; a segment that still
    has its .data is rebuilt, not deleted: recovery never destroys data (an index lost any other way
    would take its data with it), and the next vacuum deletes the segment again if the retention
    still says so.
    """
    repairs: list[SegmentRepair] = []
    bases = sorted(files)
    while len(bases) > 1 and DATA not in files[bases[0]]:
        base = bases.pop(0)
        for extension in files.pop(base):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(segment_path(directory, base, extension))
        repairs.append(SegmentRepair(partition, base, "removed index files an interrupted vacuum left without data"))
    if repairs:
        fsync_dir(directory)
    for base in bases[:-1]:
        if DATA not in files[base]:
            raise CorruptStreamError(
                f"segment {base:020d} of partition {partition} ({directory}) has lost its .data file, so "
                f"its messages are gone; nothing was changed. Restore the file from a backup, or move the "
                f"segment's other files away to accept the loss (readers would otherwise stop there)"
            )
    return repairs


def _check_sealed(
    directory: str,
    partition: int,
    base: int,
    extensions: set[str],
    max_record_bytes: int,
    mode: int,
    key_index: bool,
    *,
    compact: bool,
) -> list[SegmentRepair]:
    """Rebuild what a sealed segment lacks: index files deleted by hand (sealed segments are fsynced
    before the next is created, so rebuilding from the data is exact), a missing or malformed key index."""
    repairs: list[SegmentRepair] = []
    if INDEX not in extensions or (TIMEINDEX not in extensions and not compact):
        repairs += recover_segment(
            directory, partition, base, max_record_bytes=max_record_bytes, mode=mode, compact=compact
        )[1]
    if key_index:
        repairs += ensure_sealed_key_index(directory, partition, base, mode)
    return repairs


def _open_active(
    directory: str,
    partition: int,
    base: int,
    clean: SegmentFileState | None,
    *,
    max_record_bytes: int,
    mode: int,
    key_index: bool,
    compact: bool,
) -> tuple[SegmentWriter, bool, list[SegmentRepair]]:
    """Open the active segment for appending: trusted as the last clean close recorded it (no scan),
    or recovered record by record. Returns it, whether the scan was skipped, and the repairs."""
    entries = _trusted_entries(directory, base, clean, key_index)
    if clean is not None and entries is not None:
        writer = SegmentWriter.open(
            directory,
            base,
            next_offset=base + entries,
            data_size=clean.data_file[0],
            key_index=key_index,
            mode=mode,
            compact=compact,
        )
        return writer, True, []
    recovered, repairs = recover_segment(
        directory, partition, base, max_record_bytes=max_record_bytes, mode=mode, key_index=key_index, compact=compact
    )
    writer = SegmentWriter.open(
        directory,
        base,
        next_offset=recovered.next_offset,
        data_size=recovered.data_size,
        key_index=key_index,
        mode=mode,
        compact=compact,
    )
    return writer, False, repairs


def _trusted_entries(directory: str, base: int, clean: SegmentFileState | None, key_index: bool) -> int | None:
    """The active segment's message count as the clean-close record has it, if its files are exactly
    as recorded and its key index suits the setting (one entry per message, or no file at all)."""
    if clean is None or clean.base_offset != base or SegmentFileState.of_files(directory, base) != clean:
        return None
    entries = clean.message_count
    if entries is None:
        return None
    keys = clean.keyindex_file
    if key_index != (keys is not None) or (keys is not None and keys[0] != entries * keyindex_format.ENTRY_BYTES):
        return None
    return entries
