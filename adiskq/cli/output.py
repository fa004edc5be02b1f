"""How the command line prints: consoles, tables, numbers, sizes and times.

rich is imported here, on first use, never at start-up: most of ``adiskq``'s start-up time would
otherwise go to importing it for commands that print no table.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
import sys
from typing import TYPE_CHECKING, TextIO

import click

from .._sansio.values import datetime_from_ns

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

__all__ = [
    "console",
    "format_bytes",
    "format_count",
    "format_time",
    "iso_time",
    "print_json",
    "progress_bar",
    "table",
    "warn",
]

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
_FILE_WIDTH = 200


def console(*, stderr: bool = False, file: TextIO | None = None) -> Console:
    """A rich console on stdout (or stderr), wide enough for tables when it is not a terminal."""
    # Looked up now, not at import: click's test runner swaps sys.stdout while a command runs.
    stream = file or (sys.stderr if stderr else sys.stdout)
    made = _console_class()(file=stream, highlight=False, soft_wrap=True, emoji=False)
    if not made.is_terminal and "COLUMNS" not in os.environ:
        # Into a file or a pipe, tables keep their natural width instead of wrapping at 80 columns.
        made.width = _FILE_WIDTH
    return made


@functools.cache
def _console_class() -> type[Console]:
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # rich would exit with status 1 here; the command line's boundary ends quietly instead.
            raise BrokenPipeError

    return _Console


def table(*columns: str, title: str | None = None, right: tuple[str, ...] = ()) -> Table:
    """A plain table; columns named in ``right`` hold numbers (right-aligned, never cut)."""
    from rich import box
    from rich.table import Table

    made = Table(
        title=title, box=box.SIMPLE_HEAD, show_edge=False, title_justify="left", title_style="bold", pad_edge=False
    )
    for name in columns:
        if name in right:
            # Numbers are never cut: on a narrow terminal the text columns wrap instead.
            made.add_column(name, justify="right", no_wrap=True, min_width=len(name))
        else:
            made.add_column(name, overflow="fold")
    return made


def progress_bar(what: str, *, total: float, unit_bytes: bool = True) -> Progress:
    """A progress bar on stderr, shown only when stderr is a terminal."""
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    shown = console(stderr=True)
    amount = (DownloadColumn(binary_units=True), TransferSpeedColumn()) if unit_bytes else (MofNCompleteColumn(),)
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        *amount,
        TimeRemainingColumn(),
        console=shown,
        transient=True,
        disable=not shown.is_terminal,
    )
    bar.add_task(what, total=total)
    return bar


def warn(message: str) -> None:
    """One line on stderr, prefixed so it stands out from output."""
    click.echo(f"warning: {message}", err=True)


def print_json(value: object) -> None:
    """``value`` as indented JSON on stdout."""
    click.echo(json.dumps(value, indent=2, sort_keys=False))


def format_bytes(size: int) -> str:
    """``512 B``, ``1.5 KiB``, ``32.0 MiB``: binary units, as segment sizes are set."""
    amount = float(size)
    for unit in _UNITS:
        if abs(amount) < 1024 or unit == _UNITS[-1]:
            return f"{size} B" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    raise AssertionError("unreachable")


def format_count(count: int) -> str:
    """``1,234,567``."""
    return f"{count:,}"


def format_time(timestamp_ns: int | None, *, zone: bool = True) -> str:
    """``2026-01-31 08:00:00.123 UTC`` for people (``-`` for none); without the zone for tables that say it."""
    if timestamp_ns is None:
        return "-"
    when = datetime_from_ns(timestamp_ns)
    return f"{when:%Y-%m-%d %H:%M:%S}.{when.microsecond // 1000:03d}" + (" UTC" if zone else "")


def format_duration(duration: dt.timedelta) -> str:
    """``7d``, ``1h30m``, ``90s``: the way durations are given on the command line."""
    seconds = duration.total_seconds()
    parts = []
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            count, seconds = divmod(seconds, size)
            parts.append(f"{int(count)}{unit}")
    if seconds or not parts:
        parts.append(f"{seconds:g}s")
    return "".join(parts)


def iso_time(timestamp_ns: int) -> str:
    """``2026-01-31T08:00:00.123456789Z``: ISO-8601 in UTC, to the nanosecond, for machines."""
    seconds, nanoseconds = divmod(timestamp_ns, 1_000_000_000)
    return f"{_iso_seconds(seconds)}.{nanoseconds:09d}Z"


@functools.lru_cache(maxsize=1024)
def _iso_seconds(seconds: int) -> str:
    # Messages come in bursts within the same second: formatting a datetime costs microseconds.
    return f"{_EPOCH + dt.timedelta(seconds=seconds):%Y-%m-%dT%H:%M:%S}"
