"""The values the command line reads and writes: positions, durations, sizes, times."""

from __future__ import annotations

import datetime as dt

import pytest

from adiskq.cli.output import format_bytes, format_duration, format_time, iso_time
from adiskq.cli.params import parse_duration, parse_position, parse_size

UTC = dt.UTC


@pytest.mark.parametrize(
    ("text", "position"),
    [
        ("oldest", "oldest"),
        ("NEWEST", "newest"),
        ("active-oldest", "active-oldest"),
        ("0", 0),
        ("4711", 4711),
        ("2026-01-31T08:00:00Z", dt.datetime(2026, 1, 31, 8, tzinfo=UTC)),
        ("2026-01-31T08:00:00", dt.datetime(2026, 1, 31, 8, tzinfo=UTC)),
        ("2026-01-31", dt.datetime(2026, 1, 31, tzinfo=UTC)),
        ("2026-01-31T09:00:00+01:00", dt.datetime(2026, 1, 31, 8, tzinfo=UTC)),
    ],
)
def test_positions(text: str, position: object) -> None:
    """Names, offsets and ISO-8601 times (UTC when no zone is given)."""
    assert parse_position(text) == position


@pytest.mark.parametrize("text", ["", "-1", "later", "2026-13-01", "1.5"])
def test_positions_that_are_not(text: str) -> None:
    """Anything else is refused with the forms that are accepted."""
    with pytest.raises(ValueError, match="use oldest, newest, active-oldest, an offset"):
        parse_position(text)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90), ("90s", 90), ("15m", 900), ("24h", 86_400), ("7d", 604_800), ("2w", 1_209_600), ("1h30m", 5_400),
     ("500ms", 0.5), ("1.5h", 5_400)],
)  # fmt: skip
def test_durations(text: str, seconds: float) -> None:
    """Units from milliseconds to weeks, combined, or plain seconds."""
    assert parse_duration(text) == dt.timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "soon", "5y", "0", "0s", "1h x"])
def test_durations_that_are_not(text: str) -> None:
    """Unknown units, garbage and zero are refused."""
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("text", "size"),
    [("1024", 1024), ("64k", 64_000), ("500MB", 500_000_000), ("1GiB", 2**30), ("1.5 KiB", 1536), ("2tb", 2 * 10**12)],
)
def test_sizes(text: str, size: int) -> None:
    """Decimal (kB, MB) and binary (KiB, MiB) units, any case, or plain bytes."""
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "lots", "0", "5 XB", "-1"])
def test_sizes_that_are_not(text: str) -> None:
    """Unknown units, garbage and zero are refused."""
    with pytest.raises(ValueError, match="size"):
        parse_size(text)


@pytest.mark.parametrize(
    ("size", "shown"),
    [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (32 * 2**20, "32.0 MiB"), (3 * 2**40, "3.0 TiB")],
)
def test_sizes_are_shown_in_binary_units(size: int, shown: str) -> None:
    """Sizes on disk are shown in B, KiB, MiB, ..."""
    assert format_bytes(size) == shown


@pytest.mark.parametrize(("seconds", "shown"), [(90, "1m30s"), (3_600, "1h"), (7 * 86_400, "7d"), (0.5, "0.5s")])
def test_durations_are_shown_as_they_are_given(seconds: float, shown: str) -> None:
    """A duration prints the way the command line takes it."""
    assert format_duration(dt.timedelta(seconds=seconds)) == shown


def test_times_for_machines_keep_every_nanosecond() -> None:
    """ISO-8601 in UTC to the nanosecond; before 1970 too."""
    assert iso_time(1_767_225_600_123_456_789) == "2026-01-01T00:00:00.123456789Z"
    assert iso_time(-1) == "1969-12-31T23:59:59.999999999Z"


def test_times_for_people_show_milliseconds() -> None:
    """People get milliseconds, and the zone unless a table heading says it."""
    assert format_time(1_767_225_600_123_456_789) == "2026-01-01 00:00:00.123 UTC"
    assert format_time(1_767_225_600_123_456_789, zone=False) == "2026-01-01 00:00:00.123"
    assert format_time(None) == "-"
