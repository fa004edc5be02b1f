"""The values the command line takes: positions in a stream, durations, sizes, headers.

Each is a ``click.ParamType``, so a bad value is a usage error (exit status 2) that names the option
and shows what would have been accepted.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from typing import TYPE_CHECKING, Final, Literal, TypeAlias

import click

__all__ = [
    "DURATION",
    "END",
    "HEADER",
    "POSITION",
    "RATIO",
    "SIZE",
    "START",
    "Position",
    "parse_duration",
    "parse_position",
    "parse_size",
    "utf8_text",
]

Named: TypeAlias = Literal["oldest", "newest", "active-oldest"]
Position: TypeAlias = Named | int | dt.datetime
_NAMED: Final[tuple[Named, ...]] = ("oldest", "newest", "active-oldest")

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|w|d|h|m|s)")
_DURATION_UNITS: Final = {"w": 604_800.0, "d": 86_400.0, "h": 3_600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)\s*([kmgtp]?i?b?)$", re.IGNORECASE)
_SIZE_UNITS: Final = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "p": 10**15}


def parse_time(text: str) -> dt.datetime:
    """An ISO-8601 time; without a zone it is taken as UTC (what adiskq prints is UTC too)."""
    when = dt.datetime.fromisoformat(text)
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)


def parse_position(text: str) -> Position:
    """``oldest``, ``newest``, ``active-oldest``, an offset, or an ISO-8601 time."""
    lowered = text.strip().lower()
    for name in _NAMED:
        if lowered == name:
            return name
    if lowered.isdigit():
        return int(lowered)
    try:
        return parse_time(text.strip())
    except ValueError:
        raise ValueError(
            f"{text!r} is not a position: use oldest, newest, active-oldest, an offset such as 42, "
            "or an ISO-8601 time such as 2026-01-31T08:00:00Z"
        ) from None


def parse_duration(text: str) -> dt.timedelta:
    """``90s``, ``15m``, ``24h``, ``7d``, ``2w``, ``1h30m``, or a plain number of seconds."""
    cleaned = text.strip().lower().replace(" ", "")
    try:
        seconds = float(cleaned)
    except ValueError:
        matches = list(_DURATION_PART.finditer(cleaned))
        if not matches or "".join(m.group(0) for m in matches) != cleaned:
            raise ValueError(f"{text!r} is not a duration: use e.g. 90s, 15m, 24h, 7d or 1h30m") from None
        seconds = sum(float(m.group(1)) * _DURATION_UNITS[m.group(2)] for m in matches)
    if seconds <= 0:
        raise ValueError(f"{text!r}: a duration must be longer than zero")
    return dt.timedelta(seconds=seconds)


def parse_size(text: str) -> int:
    """``500MB``, ``1GiB``, ``64k``, or a plain number of bytes (decimal and binary units)."""
    match = _SIZE.match(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a size: use e.g. 1048576, 500MB or 1GiB")
    number, unit = float(match.group(1)), match.group(2).lower().rstrip("b")
    binary = unit.endswith("i")
    prefix = unit.rstrip("i")
    factor = 1024 ** " kmgtp".index(prefix or " ") if binary else _SIZE_UNITS[prefix]
    size = int(number * factor)
    if size <= 0:
        raise ValueError(f"{text!r}: a size must be at least one byte")
    return size


if TYPE_CHECKING:
    _ParamType: TypeAlias = click.ParamType[object, object]  # generic in the click the suite runs
else:
    _ParamType = click.ParamType  # older clicks are not subscriptable at run time


class _Parsed(_ParamType):
    """A click type from a parse function that raises ValueError with the reason."""

    def __init__(self, name: str, metavar: str) -> None:
        self.name = name
        self._metavar = metavar

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return self._metavar

    def parse(self, text: str) -> object:
        raise NotImplementedError

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> object:
        if not isinstance(value, str):
            return value
        try:
            return self.parse(value)
        except ValueError as error:
            self.fail(str(error), param, ctx)


class _PositionType(_Parsed):
    def parse(self, text: str) -> object:
        return parse_position(text)


class _EndType(_Parsed):
    """Where reading stops: ``newest``, an offset or a time (``oldest`` would read nothing)."""

    def parse(self, text: str) -> object:
        position = parse_position(text)
        if position in ("oldest", "active-oldest"):
            raise ValueError(f"{text!r} is not an end: use newest, an offset such as 42, or an ISO-8601 time")
        return position


class _DurationType(_Parsed):
    def parse(self, text: str) -> object:
        return parse_duration(text)


class _SizeType(_Parsed):
    def parse(self, text: str) -> object:
        return parse_size(text)


class _RatioType(_Parsed):
    def parse(self, text: str) -> object:
        try:
            ratio = float(text[:-1]) / 100 if text.endswith("%") else float(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a ratio: use e.g. 0.85 or 85%") from None
        if not 0 < ratio < 1:
            raise ValueError(f"{text!r}: give a ratio between 0 and 1 (or 0% and 100%), such as 0.85")
        return ratio


def utf8_text(text: str, what: str) -> str:
    """``text`` itself when UTF-8 can store it; else ValueError naming ``what``. Click hands over
    argument bytes that are not UTF-8 as lone surrogates (os.fsdecode), which no key, header name
    or tag can hold."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} '{_escaped(text)}' is not valid UTF-8: give it as UTF-8 text") from None
    return text


def _escaped(text: str) -> str:
    """``text`` with what is not UTF-8 shown as escapes: the bytes given (\\xff), or a surrogate
    that came from no bytes (a JSON \\ud800) as itself."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


class _HeaderType(_Parsed):
    def parse(self, text: str) -> object:
        name, sep, value = text.partition("=")
        if not sep or not name:
            raise ValueError(f"{text!r} is not a header: use NAME=VALUE, e.g. type=created")
        # A value is bytes: the ones given, UTF-8 or not (os.fsencode undoes click's decoding).
        return utf8_text(name, "the header name"), os.fsencode(value)


POSITION: Final = _PositionType("position", "oldest|newest|OFFSET|TIME")
START: Final = _PositionType("start", "oldest|active-oldest|newest|OFFSET|TIME")  # read --start takes all of them
END: Final = _EndType("end", "newest|OFFSET|TIME")
DURATION: Final = _DurationType("duration", "DURATION")
SIZE: Final = _SizeType("size", "SIZE")
RATIO: Final = _RatioType("ratio", "RATIO")
HEADER: Final = _HeaderType("header", "NAME=VALUE")
