"""``adiskq retries`` shows a group's pending retries; ``adiskq dead-letters`` lists its dead letters
and hands them back to their stream."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

import click

from .errors import Failure
from .output import console, format_count, print_json, table

if TYPE_CHECKING:
    from .._sansio.values import Message

__all__ = ["dead_letters", "retries"]

_GROUP = click.option("--group", "-g", "name", required=True, metavar="NAME", help="The consumer group.")


def _group_name(name: str) -> str:
    from .._sansio.naming import validate_group_name

    try:
        return validate_group_name(name)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="'--group'") from None


def _existing_group(stream_path: str, name: str) -> str:
    """``name`` if the stream has that group (a member opened it once); else a usage error listing its groups."""
    from .._storage.offsets import list_groups

    groups = list_groups(stream_path)
    if name not in groups:
        known = ", ".join(groups) if groups else "none yet"
        raise click.BadParameter(
            f"stream {stream_path!r} has no group {name!r} (its groups: {known}); a group exists once a "
            "member opened it",
            param_hint="'--group'",
        )
    return name


def _text(value: bytes | None) -> str:
    return "" if value is None else value.decode("utf-8", "replace")


def _due(due_ns: int, now_ns: int) -> str:
    seconds = (due_ns - now_ns) / 1e9
    return "now" if seconds <= 0 else f"in {seconds:.1f} s"


@click.command()
@click.argument("path", type=click.Path(path_type=str))
@_GROUP
@click.option("--limit", type=click.IntRange(1), default=1000, show_default=True, help="Show at most this many.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines instead of a table.")
def retries(path: str, name: str, limit: int, as_json: bool) -> None:
    """Show a consumer group's pending retries: what waits, since which attempt, until when, and why.

    A retry is pending from "await group.retry(message, delay=...)" until the group commits its
    next delivery (stored within the group's commit_interval).

    \b
    Examples:
      adiskq retries orders --group billing
      adiskq retries orders --group billing --json
    """
    from .._sansio import retries as headers
    from .._storage.retries import load_retry_settings, pending_retries
    from .._storage.stream import StreamReader

    name = _group_name(name)
    stream = StreamReader.open(os.fspath(path))
    _existing_group(stream.path, name)
    pending = pending_retries(stream.path, name, limit=limit)
    settings = load_retry_settings(stream.path, name)
    letters = len(_dead_letters_of(stream.path, name, settings.dead_letter_path))
    now = time.time_ns()
    if as_json:
        print_json(
            {
                "group": name,
                "pending": [
                    {
                        "partition": retry.message.partition,
                        "offset": retry.message.offset,
                        "attempt": retry.message.attempt,
                        "due_ns": retry.due_ns,
                        "reason": _text(retry.message.headers.get(headers.REASON_HEADER)) or None,
                    }
                    for retry in pending
                ],
                "dead_letter_path": settings.dead_letter_path,
                "max_attempts": settings.max_attempts,
                "dead_letters": letters,
            }
        )
        return
    out = console()
    if pending:
        rows = table(
            "partition",
            "offset",
            "attempt",
            "due",
            "reason",
            title=f"group {name}: pending retries",
            right=("partition", "offset", "attempt"),
        )
        for retry in pending:
            message = retry.message
            rows.add_row(
                str(message.partition),
                str(message.offset),
                str(message.attempt),
                _due(retry.due_ns, now),
                _text(message.headers.get(headers.REASON_HEADER)),
            )
        out.print(rows)
    else:
        out.print(f"group {name} has no pending retries", markup=False)
    limit_text = "no limit" if settings.max_attempts is None else f"max_attempts={settings.max_attempts}"
    out.print(f"dead letters: {format_count(letters)} in {settings.dead_letter_path} ({limit_text})", markup=False)


def _dead_letters_of(stream_path: str, name: str, dead_letter_path: str) -> list[Message]:
    """The group's dead letters from this stream, in the order they were stored (none if no stream is there)."""
    from .._errors import StreamNotFoundError
    from .._sansio import retries as headers
    from .._storage.stream import StreamReader

    try:
        dead = StreamReader.open(dead_letter_path)
    except StreamNotFoundError:
        return []
    source = os.path.realpath(stream_path)
    found: list[Message] = []
    for partition in range(dead.partition_count):
        reader = dead.partition(partition)
        oldest, _ = reader.bounds()
        with reader.cursor(oldest) as cursor:
            while batch := cursor.read(1000):
                for letter in batch:
                    if letter.headers.get(headers.GROUP_HEADER) != name.encode():
                        continue
                    stream = letter.headers.get(headers.SOURCE_STREAM_HEADER, b"")
                    if os.path.realpath(os.fsdecode(stream)) == source:
                        found.append(letter)
    return found


def _redrive_marker(name: str) -> str:
    """The group on the dead-letter stream whose offsets say which dead letters were handed back."""
    marker = f"redrive.{name}"
    if len(marker) > 200:
        raise Failure(f"group name {name!r} is too long to keep a redrive mark beside it (at most 192 characters)")
    return marker


@click.command(name="dead-letters")
@click.argument("path", type=click.Path(path_type=str))
@_GROUP
@click.option(
    "--redrive",
    is_flag=True,
    help="Hand the dead letters not handed back yet to the stream, as new messages (attempt 1 again).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines instead of a table.")
def dead_letters(path: str, name: str, redrive: bool, as_json: bool) -> None:
    """List a consumer group's dead letters, or hand them back to the stream with --redrive.

    A dead letter is a message the group gave up on: "await group.dead_letter(message, reason=...)",
    or a retry at max_attempts. --redrive pushes each one not handed back before to PATH again
    (value, key, tag and the producer's headers; as a shared producer, beside a running service's
    shared producers), so the group processes it anew; the dead-letter stream keeps it, marked
    handed back.

    \b
    Examples:
      adiskq dead-letters orders --group billing
      adiskq dead-letters orders --group billing --redrive
    """
    from .._sansio import retries as headers
    from .._storage.offsets import load_offsets
    from .._storage.retries import load_retry_settings
    from .._storage.stream import StreamReader

    name = _group_name(name)
    stream = StreamReader.open(os.fspath(path))
    _existing_group(stream.path, name)
    settings = load_retry_settings(stream.path, name)
    letters = _dead_letters_of(stream.path, name, settings.dead_letter_path)
    marker = _redrive_marker(name)
    done = load_offsets(settings.dead_letter_path, marker) if letters else {}

    def handed_back(letter: Message) -> bool:
        return letter.offset < done.get(letter.partition, 0)

    if redrive:
        todo = [letter for letter in letters if not handed_back(letter)]
        _redrive(stream.path, settings.dead_letter_path, marker, todo)
        console().print(
            f"handed {format_count(len(todo))} dead letters of group {name} back to {stream.path}", markup=False
        )
        return
    if as_json:
        print_json(
            [
                {
                    "partition": int(_text(letter.headers.get("adiskq-source-partition")) or -1),
                    "offset": int(_text(letter.headers.get("adiskq-source-offset")) or -1),
                    "attempt": letter.attempt,
                    "reason": _text(letter.headers.get(headers.REASON_HEADER)),
                    "dead_lettered_ns": letter.timestamp_ns,
                    "handed_back": handed_back(letter),
                }
                for letter in letters
            ]
        )
        return
    out = console()
    if not letters:
        out.print(f"group {name} has no dead letters in {settings.dead_letter_path}", markup=False)
        return
    rows = table(
        "partition",
        "offset",
        "attempt",
        "reason",
        "handed back",
        title=f"group {name}: dead letters",
        right=("partition", "offset", "attempt"),
    )
    for letter in letters:
        rows.add_row(
            _text(letter.headers.get("adiskq-source-partition")),
            _text(letter.headers.get("adiskq-source-offset")),
            str(letter.attempt),
            _text(letter.headers.get(headers.REASON_HEADER)),
            "yes" if handed_back(letter) else "no",
        )
    out.print(rows)


def _redrive(stream_path: str, dead_letter_path: str, marker: str, letters: list[Message]) -> None:
    """Push the letters to the stream (shared, fsynced), then mark them handed back (at least once:
    a crash between the two hands the last ones back again)."""
    if not letters:
        return
    import anyio

    import adiskq

    from .._sansio import retries as headers
    from .._storage.offsets import update_offsets

    async def push_back() -> None:
        async with adiskq.Producer(stream_path, shared=True, flush="sync") as producer:
            await producer.push_many(
                [
                    adiskq.Record(
                        letter.value,
                        key=letter.key,
                        headers=headers.user_headers(letter.headers) or None,
                        tag=letter.tag,
                    )
                    for letter in letters
                ]
            )

    anyio.run(push_back)
    ends: dict[int, int] = {}
    for letter in letters:
        ends[letter.partition] = max(ends.get(letter.partition, 0), letter.offset + 1)
    update_offsets(dead_letter_path, marker, ends)
