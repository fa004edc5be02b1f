"""``adiskq check``: verify every record and index entry; ``--repair`` fixes what can be fixed.

The checking and the repairing are the storage layer's (``adiskq._storage.check``); this module
shows their findings, words the advice, and asks for the repair: it needs the stream's one-writer
lock, opens the stream as a producer would (crash recovery of each partition's last segment), then
rebuilds the index files of sealed segments whose data is sound, then checks again.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import click

from .errors import Failure, locked_failure
from .output import console, format_bytes, format_count, progress_bar

if TYPE_CHECKING:
    from .._storage.check import CheckResult
    from .._storage.stream import StreamReader
    from .._storage.verify import Problem

__all__ = ["check"]


def run_check(stream: StreamReader) -> CheckResult:
    """``check_stream`` with a progress bar on a terminal."""
    from .._storage.check import check_stream

    bar = progress_bar("checking", total=0)
    with bar:
        task = bar.task_ids[0]
        return check_stream(
            stream,
            on_total=lambda total: bar.update(task, total=total),
            on_progress=lambda size: bar.advance(task, size),
        )


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
    for note in result.notes:
        out.print(f"note: {_where(note, stream_path, shown_path)}", markup=False, highlight=False)
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


def _repair(stream_path: str, problems: list[Problem]) -> list[str]:
    from .._errors import StreamLockedError
    from .._storage.check import repair_stream

    try:
        return repair_stream(stream_path, problems)
    except StreamLockedError as error:
        raise _locked(stream_path, error.holder) from None


def _locked(stream_path: str, holder: str | None) -> Failure:
    return locked_failure(
        stream_path,
        holder,
        "is open in a producer",
        "; --repair needs the stream to itself. Stop that producer (its next open repairs the last segment "
        "of each partition anyway), then run this again",
    )


def _unfinished_creations(root: str, names: list[str], repair: bool) -> None:
    """A folder of streams (a Kafka gateway's root) holding stream creations a crash cut short:
    named, and removed with --repair (a gateway removes them itself when it starts)."""
    from .._storage.stream_creation import remove_leftovers

    out = console()
    shown = ", ".join(names)
    if not repair:
        out.print(
            f"{root} holds {len(names)} topic creation{'s' if len(names) != 1 else ''} that did not finish "
            f"({shown}): no topic of it was published. A Kafka gateway serving {root} removes them when it "
            f"starts; `adiskq check --repair {root}` removes them now",
            markup=False,
        )
        raise click.exceptions.Exit(1)
    removed = remove_leftovers(root)
    out.print(f"removed {', '.join(removed)}: topic creations that did not finish", markup=False)


@click.command()
@click.argument("path", type=click.Path(path_type=str))
@click.option("--repair", is_flag=True, help="Fix what can be fixed (needs the stream to itself), then check again.")
def check(path: str, repair: bool) -> None:
    """Verify every record (size, magic, CRC) and every index entry of a stream.

    Reads every segment of every partition and prints each problem with its file and byte
    position, and notes on what is no damage (a group's offset committed past its partition's end,
    which Kafka allows). Exit status 0 only when the stream is sound. With --repair, it cuts torn tails,
    rebuilds index files from the data, and says what it changed; it refuses while a producer
    has the stream open. Damage inside sealed segments is reported with what you can do.

    Given a Kafka gateway's root folder instead, it names the topic creations a crash cut short
    (scratch folders no client sees), and --repair removes them (the gateway does at its start).

    \b
    Examples:
      adiskq check orders
      adiskq check orders --repair
      adiskq check /var/lib/gateway-root --repair
    """
    from .._storage.stream import StreamReader
    from .._storage.stream_creation import leftovers

    if not os.path.exists(os.path.join(path, "settings.json")) and leftovers(path):
        _unfinished_creations(path, leftovers(path), repair)
        return
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
    changed = _repair(stream.path, result.problems)
    out.print("repaired:" if changed else "the repair changed nothing", markup=False)
    for line in changed:
        out.print(f"  {line}", markup=False)
    out.print("checking again:", markup=False)
    again = run_check(stream)
    report(again, stream.path, path)
    if again.problems or again.unreadable:
        raise click.exceptions.Exit(1)
