"""`adiskq vacuum`: delete what a retention no longer keeps, and say what went."""

from __future__ import annotations

import datetime as dt
import time

import pytest
from support.cli import fill, invoke, producer_open

import adiskq


@pytest.fixture
def many_segments(stream_path: str) -> str:
    """One partition of 40 messages of ~120 bytes in 1 KiB segments (several sealed segments)."""
    fill(stream_path, [b"x" * 100] * 40, segment_size_bytes=1024, one_at_a_time=True)
    assert adiskq.stats(stream_path).partitions[0].segments >= 4
    return stream_path


def test_max_bytes_given_here_deletes_the_oldest_segments(many_segments: str) -> None:
    """`--max-bytes` deletes sealed segments, oldest first, and lists each one."""
    before = adiskq.stats(many_segments).partitions[0]
    result = invoke("vacuum", many_segments, "--max-bytes", "2KiB")
    assert result.exit_code == 0, result.output
    after = adiskq.stats(many_segments).partitions[0]
    assert after.segments < before.segments
    assert after.next_offset == before.next_offset
    assert after.size_bytes <= 2048 or after.segments == 1
    removed = before.segments - after.segments
    assert f"removed {removed} segments: {after.oldest_offset} messages" in result.stdout
    assert "00000000000000000000" in result.stdout
    assert f"oldest offsets now: 0: {after.oldest_offset}" in result.stdout


def test_the_streams_own_retention_is_used_by_default(stream_path: str) -> None:
    """Without limits on the command line, the retention in settings.json applies."""
    fill(
        stream_path,
        [b"x" * 100] * 40,
        segment_size_bytes=1024,
        retention=adiskq.Retention(max_bytes=2048),
        one_at_a_time=True,
    )
    # The producer vacuums on its own schedule; make sure data is over the limit again first.
    fill(stream_path, [b"y" * 100] * 30, one_at_a_time=True)
    before = adiskq.stats(stream_path).partitions[0]
    result = invoke("vacuum", stream_path)
    assert result.exit_code == 0, result.output
    assert "deleted (by max 2.0 KiB per partition)" in result.stdout
    assert adiskq.stats(stream_path).partitions[0].segments < before.segments


def test_max_age_deletes_segments_whose_newest_message_is_older(stream_path: str) -> None:
    """`--max-age 1h` deletes sealed segments of old messages; recent ones stay."""
    old = time.time_ns() - 2 * 3600 * 10**9
    fill(
        stream_path,
        [adiskq.Record(b"x" * 100, timestamp=old) for _ in range(20)] + [adiskq.Record(b"new" * 40)] * 20,
        segment_size_bytes=1024,
        one_at_a_time=True,
    )
    result = invoke("vacuum", stream_path, "--max-age", "1h")
    assert result.exit_code == 0, result.output
    assert "deleted (by max age 1h)" in result.stdout
    oldest = adiskq.stats(stream_path).partitions[0].oldest_offset
    assert 0 < oldest <= 20
    assert adiskq.read(stream_path, 0, oldest).timestamp > dt.datetime.now(dt.UTC) - dt.timedelta(hours=3)


def test_dry_run_deletes_nothing(many_segments: str) -> None:
    """`--dry-run` lists what would go and leaves it."""
    before = adiskq.stats(many_segments).partitions[0]
    result = invoke("vacuum", many_segments, "--max-bytes", "2KiB", "--dry-run")
    assert result.exit_code == 0
    assert "would delete" in result.stdout
    assert "nothing was" in result.stdout
    assert adiskq.stats(many_segments).partitions[0] == before


def test_a_stream_without_retention_has_nothing_to_delete(many_segments: str) -> None:
    """With no retention anywhere, vacuum says the stream keeps everything."""
    result = invoke("vacuum", many_segments)
    assert result.exit_code == 0
    assert "the stream keeps everything" in result.stdout


def test_nothing_to_delete_within_the_limits(many_segments: str) -> None:
    """Limits the stream is within delete nothing, and say so."""
    result = invoke("vacuum", many_segments, "--max-bytes", "1GiB")
    assert result.exit_code == 0
    assert "nothing to delete: every sealed segment is within max 1.0 GiB per partition" in result.stdout


def test_vacuum_refuses_while_a_producer_has_the_stream(many_segments: str) -> None:
    """Another producer's lock: one line saying who has it and what to do; nothing deleted."""
    before = adiskq.stats(many_segments).partitions[0]
    with producer_open(many_segments):
        result = invoke("vacuum", many_segments, "--max-bytes", "1KiB")
    assert result.exit_code == 1
    message = result.stderr.strip()
    assert message.startswith(f"Error: stream {many_segments!r} is open in a producer (pid ")
    assert "that producer vacuums by the stream's retention" in message
    assert len(message.splitlines()) == 1
    assert adiskq.stats(many_segments).partitions[0] == before


@pytest.mark.parametrize(
    ("option", "value"), [("--max-age", "soon"), ("--max-bytes", "lots"), ("--max-disk-usage", "1.5")]
)
def test_bad_limits_are_misuse(many_segments: str, option: str, value: str) -> None:
    """A limit that cannot be read is a usage error."""
    assert invoke("vacuum", many_segments, option, value).exit_code == 2


def test_vacuum_of_a_missing_stream_creates_nothing(stream_path: str) -> None:
    """Vacuum never creates a stream where there is none."""
    import os

    result = invoke("vacuum", stream_path, "--max-age", "1d")
    assert result.exit_code == 1
    assert not os.path.exists(stream_path)
