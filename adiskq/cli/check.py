"""``adiskq check``: verify every record and index entry; ``--repair`` fixes what can be fixed.

The check itself reads only (``adiskq._storage.verify``). ``--repair`` needs the stream's one-writer
lock: it opens the stream as a producer would, which runs crash recovery (the torn tail of each
partition's last segment is cut, its index entries rebuilt, missing index files recreated), then
rebuilds the index files of sealed segments whose data is sound, then checks again.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, NamedTuple

import click

from .errors import Failure, locked_failure
from .output import console, format_bytes, format_count, progress_bar

if TYPE_CHECKING:
    from .._storage.stream import StreamReader
    from .._storage.verify import Problem

__all__ = ["check"]


class CheckResult(NamedTuple):
    """Everything one pass found."""

    problems: list[Problem]
    unreadable: list[Problem]  # files the check could not read (permissions, I/O errors)
    partitions: int
    segments: int
    records: int
    data_bytes: int
    owner: dict[str, object] | None


def run_check(stream: StreamReader) -> CheckResult:
    """Check every segment of every partition (with a progress bar on a terminal), then the groups."""
    from .._storage.lock import read_owner
    from .._storage.verify import Problem, check_groups, check_segment, list_segments

    owner = read_owner(stream.path)
    segments, problems = list_segments(stream)
    sizes = [segment.data_bytes() for segment in segments]
    records = 0
    unreadable: list[Problem] = []
    next_offsets: dict[int, int] = {}
    bar = progress_bar("checking", total=sum(sizes))
    with bar:
        task = bar.task_ids[0]
        for i, (segment, size) in enumerate(zip(segments, sizes, strict=True)):
            previous = segments[i - 1] if i else None
            following = segments[i + 1] if i + 1 < len(segments) else None
            expected = (
                next_offsets.get(segment.partition) if previous and previous.partition == segment.partition else None
            )
            next_base = following.base if following is not None and following.partition == segment.partition else None
            done = 0

            def advance(size: int) -> None:
                nonlocal done
                done += size
                bar.advance(task, size)

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
                bar.advance(task, max(0, size - done))
            if result.vanished:
                continue  # vacuumed while we looked: the next segment is the partition's first
            records += result.records
            problems.extend(result.problems)
            next_offsets[segment.partition] = result.next_offset
    problems.extend(check_groups(stream, next_offsets))
    return CheckResult(problems, unreadable, stream.partition_count, len(segments), records, sum(sizes), owner)


def _where(problem: Problem, stream_path: str, shown_path: str) -> str:
    """The problem with its file named from the path the user gave."""
    relative = os.path.relpath(problem.path, stream_path)
    where = os.path.join(shown_path, relative) if not relative.startswith("..") else problem.path
    at = "" if problem.position is None else f":{problem.position}"
    return f"{where}{at}: {problem.what}"


def report(result: CheckResult, stream_path: str, shown_path: str, *, repairing: bool = False) -> None:
    """Each problem on its own line, a summary, and what can be done about the rest."""
    out = console()
    for problem in [*result.unreadable, *result.problems]:
        out.print(_where(problem, stream_path, shown_path), markup=False, highlight=False)
    checked = (
        f"checked {result.partitions} partitions, {result.segments} segments, {format_count(result.records)} "
        f"records ({format_bytes(result.data_bytes)})"
    )
    if result.owner is not None:
        checked += (
            f"; a producer is writing (pid {result.owner.get('pid', '?')} on host {result.owner.get('host', '?')}), "
            "so the unindexed tails of the active segments were not checked"
        )
    if not result.problems and not result.unreadable:
        out.print(f"{checked}: no problems", markup=False)
        return
    count = len(result.problems) + len(result.unreadable)
    out.print(f"{checked}: {count} problem{'s' if count != 1 else ''}", markup=False)
    if result.unreadable:
        out.print(
            f"  {len(result.unreadable)} files could not be read, so they were not checked: run adiskq as a user "
            "who may read every file of the stream",
            markup=False,
        )
    fixable = sum(1 for p in result.problems if p.fix is not None)
    if fixable and not repairing:
        out.print(
            f"  {fixable} can be repaired: run `adiskq check --repair {shown_path}` "
            "once no producer has the stream open",
            markup=False,
        )
    damaged = len(result.problems) - fixable
    if damaged:
        verb = "needs" if damaged == 1 else "need"
        out.print(
            f"  {damaged} {verb} a person: damaged data in a sealed segment cannot be rebuilt from the stream "
            "itself. Restore the files named above from a backup, or read around the damage "
            f"(`adiskq read {shown_path} --partition P --start OFFSET`) and copy the good messages to a new stream",
            markup=False,
        )


def repair_stream(stream_path: str, problems: list[Problem]) -> list[str]:
    """Open the stream as its producer (recovery), rebuild sound sealed segments' indexes; what changed."""
    from .._errors import StreamLockedError
    from .._sansio.codec import DEFAULT_MAX_RECORD_BYTES
    from .._storage.lock import describe_holder, read_owner
    from .._storage.recovery import recover_segment
    from .._storage.stream import StreamWriter

    owner = read_owner(stream_path)
    if owner is not None:
        raise _locked(stream_path, describe_holder(owner))
    # A damaged sealed key index goes first: the producer open below rebuilds a missing one.
    removed = []
    for problem in problems:
        if problem.fix == "keyindex":
            with contextlib.suppress(FileNotFoundError):
                os.unlink(problem.path)
            removed.append(f"{problem.path}: removed the damaged key index, to be rebuilt from .data")
    try:
        # Every active segment checked record by record, also one a clean close vouches for: damage
        # that kept a file's size and time stamp (bit rot) is what check may have found there.
        writer = StreamWriter.open(stream_path, trust_clean_close=False)
    except StreamLockedError as error:
        raise _locked(stream_path, error.holder) from None
    changed = removed + [str(repair) for repair in writer.recovery.repairs]
    try:
        rebuild = {(p.partition, p.segment) for p in problems if p.fix == "rebuild"}
        for partition, base in sorted((p, b) for p, b in rebuild if p is not None and b is not None):
            directory = writer.partitions[partition].directory
            _, repairs = recover_segment(directory, partition, base, max_record_bytes=DEFAULT_MAX_RECORD_BYTES)
            changed.extend(f"{repair} (sealed segment, rebuilt from its sound data)" for repair in repairs)
    finally:
        writer.close()
    return changed


def _locked(stream_path: str, holder: str | None) -> Failure:
    return locked_failure(
        stream_path,
        holder,
        "is open in a producer",
        "; --repair needs the stream to itself. Stop that producer (its next open repairs the last segment "
        "of each partition anyway), then run this again",
    )


@click.command()
@click.argument("path", type=click.Path(path_type=str))
@click.option("--repair", is_flag=True, help="Fix what can be fixed (needs the stream to itself), then check again.")
def check(path: str, repair: bool) -> None:
    """Verify every record (size, magic, CRC) and every index entry of a stream.

    Reads every segment of every partition and prints each problem with its file and byte
    position. Exit status 0 only when the stream is sound. With --repair, it cuts torn tails,
    rebuilds index files from the data, and says what it changed; it refuses while a producer
    has the stream open. Damage inside sealed segments is reported with what you can do.

    \b
    Examples:
      adiskq check orders
      adiskq check orders --repair
    """
    from .._storage.stream import StreamReader

    stream = StreamReader.open(os.fspath(path))
    result = run_check(stream)
    report(result, stream.path, path, repairing=repair)
    if result.unreadable:
        raise click.exceptions.Exit(1)
    if not result.problems:
        return
    if not repair:
        raise click.exceptions.Exit(1)
    out = console()
    if not any(p.fix is not None for p in result.problems):
        out.print("--repair can fix none of these; nothing was changed", markup=False)
        raise click.exceptions.Exit(1)
    changed = repair_stream(stream.path, result.problems)
    out.print("repaired:" if changed else "the repair changed nothing", markup=False)
    for line in changed:
        out.print(f"  {line}", markup=False)
    out.print("checking again:", markup=False)
    again = run_check(stream)
    report(again, stream.path, path)
    if again.problems or again.unreadable:
        raise click.exceptions.Exit(1)
