"""Check a whole stream, and repair what can be repaired: structured findings, no advice.

``check_stream`` reads only: every segment of every partition (``verify.check_segment``), then the
groups' offsets (an offset past its partition's end is a note, not a problem: Kafka allows it).
``repair_stream`` needs the stream to itself: it opens the stream as its producer would, which runs
crash recovery on every partition's active segment (checked record by record, also one a clean
close vouches for: damage that kept a file's size and time stamp is what a check may have found
there), and rebuilds the index files of sealed segments whose data is sound. The
command line words the findings and says what to do (``adiskq.cli.check``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import NamedTuple

from .._errors import StreamLockedError
from .._sansio.codec import DEFAULT_MAX_RECORD_BYTES
from .lock import describe_holder, read_owner
from .log_start import LOG_START_FILE, log_start_problem
from .recovery import recover_segment
from .stream import StreamReader, StreamWriter
from .verify import Problem, check_dictionaries, check_groups, check_segment, list_segments
from .writers import describe_writers, live_writers

__all__ = ["CheckResult", "check_stream", "repair_stream"]


class CheckResult(NamedTuple):
    """Everything one pass found."""

    problems: list[Problem]
    unreadable: list[Problem]  # files the check could not read (permissions, I/O errors)
    partitions: int
    segments: int
    records: int
    data_bytes: int
    owner: dict[str, object] | None  # the producer writing the stream meanwhile, if any
    # What is worth knowing but is no damage: a group's offset committed past its partition's end
    notes: list[Problem]


def check_stream(
    stream: StreamReader,
    *,
    on_total: Callable[[int], None] | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> CheckResult:
    """Check every segment of every partition, then the groups.

    ``on_total`` hears the bytes of ``.data`` there are to check, once, before the first;
    ``on_progress`` hears of bytes checked as the check goes (every byte, in the end).
    """
    owner = read_owner(stream.path)
    if owner is None:
        writers = live_writers(stream.path)
        if writers:  # shared producers are writing: their tails are live too
            owner = {"pid": writers[0].pid, "host": writers[0].host, "shared": True, "writers": len(writers)}
    segments, problems = list_segments(stream)
    problems.extend(check_dictionaries(stream.path))
    sizes = [segment.data_bytes() for segment in segments]
    if on_total is not None:
        on_total(sum(sizes))
    records = 0
    unreadable: list[Problem] = []
    next_offsets: dict[int, int] = {}
    for i, (segment, size) in enumerate(zip(segments, sizes, strict=True)):
        previous = segments[i - 1] if i else None
        following = segments[i + 1] if i + 1 < len(segments) else None
        same_before = previous is not None and previous.partition == segment.partition
        expected = next_offsets.get(segment.partition) if same_before else None
        next_base = following.base if following is not None and following.partition == segment.partition else None
        done = 0

        def advance(checked: int) -> None:
            nonlocal done
            done += checked
            if on_progress is not None:
                on_progress(checked)

        try:
            result = check_segment(
                segment, expected_base=expected, next_base=next_base, live=owner is not None, on_progress=advance
            )
        except OSError as error:
            where = os.fspath(error.filename) if error.filename else segment.directory
            unreadable.append(Problem(where, None, f"cannot be read ({error.strerror})"))
            next_offsets.pop(segment.partition, None)  # where it ends is unknown: no gap check after it
            continue
        finally:
            if on_progress is not None:
                on_progress(max(0, size - done))
        if result.vanished:
            continue  # vacuumed while we looked: the next segment is the partition's first
        records += result.records
        problems.extend(result.problems)
        next_offsets[segment.partition] = result.next_offset
    notes: list[Problem] = []
    problems.extend(check_groups(stream, next_offsets, notes))
    for partition in range(stream.partition_count):
        directory = stream.partition_dir(partition)
        found = log_start_problem(directory, next_offsets.get(partition))
        if found is not None:
            path = os.path.join(directory, LOG_START_FILE)
            problems.append(Problem(path, None, found, fix="recovery", partition=partition))
    return CheckResult(problems, unreadable, stream.partition_count, len(segments), records, sum(sizes), owner, notes)


def repair_stream(stream_path: str, problems: list[Problem]) -> list[str]:
    """Repair what ``problems`` (of ``check_stream``) say can be repaired; what changed, a line each.

    Raises ``StreamLockedError`` (changing nothing) while any producer, exclusive or shared, has the
    stream open.
    """
    writers = live_writers(stream_path)
    if writers:
        raise StreamLockedError(stream_path, describe_writers(writers), held_shared=any(w.shared for w in writers))
    owner = read_owner(stream_path)
    if owner is not None:
        raise StreamLockedError(stream_path, describe_holder(owner), held_shared=False)
    # A damaged sealed key index goes first: the producer open below rebuilds a missing one.
    removed = []
    for problem in problems:
        if problem.fix == "keyindex":
            with contextlib.suppress(FileNotFoundError):
                os.unlink(problem.path)
            removed.append(f"{problem.path}: removed the damaged key index, to be rebuilt from .data")
    writer = StreamWriter.open(stream_path, trust_clean_close=False)
    changed = removed + [str(repair) for repair in writer.recovery.repairs]
    try:
        rebuild = {(p.partition, p.segment) for p in problems if p.fix == "rebuild"}
        for partition, base in sorted((p, b) for p, b in rebuild if p is not None and b is not None):
            directory = writer.partitions[partition].directory
            _, repairs = recover_segment(
                directory,
                partition,
                base,
                max_record_bytes=DEFAULT_MAX_RECORD_BYTES,
                compact=writer.partitions[partition].compact,
            )
            changed.extend(f"{repair} (sealed segment, rebuilt from its sound data)" for repair in repairs)
    finally:
        writer.close()
    return changed
