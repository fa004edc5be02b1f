"""`adiskq read` without --follow or --group: what is in the stream now, in three formats."""

from __future__ import annotations

import base64
import datetime as dt
import json
import subprocess
import sys

import hypothesis
import hypothesis.strategies as st
import pytest
from support.cli import fill, invoke

import adiskq
from adiskq._sansio.naming import partition_for_key
from adiskq.cli.formats import json_line, message_json

T0 = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z
SECOND = 1_000_000_000


def lines(output: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in output.splitlines()]


@pytest.fixture
def three_partitions(stream_path: str) -> str:
    """Six messages on three partitions (two keys each), one a second apart from T0."""
    keys = ["aaa", "bbb", "ccc"]  # FNV-1 places them on partitions 0, 1, 2
    assert [partition_for_key(k.encode(), 3) for k in keys] == [0, 1, 2]
    fill(
        stream_path,
        [adiskq.Record(b"m%d" % i, key=keys[i % 3], timestamp=T0 + i * SECOND) for i in range(6)],
        partitions=3,
    )
    return stream_path


def test_json_lines_carry_every_field(stream_path: str) -> None:
    """Each line: partition, offset, ISO-8601 timestamp to the nanosecond, key, value, headers."""
    fill(stream_path, [adiskq.Record(b"hello", key="k", headers={"type": b"created"}, timestamp=T0 + 123_456_789)])
    result = invoke("read", stream_path)
    assert result.exit_code == 0
    assert lines(result.stdout) == [
        {
            "partition": 0,
            "offset": 0,
            "timestamp": "2026-01-01T00:00:00.123456789Z",
            "key": "k",
            "value": "hello",
            "headers": {"type": "created"},
        }
    ]


def test_kafka_headers_are_listed_in_order_with_their_nulls(stream_path: str) -> None:
    """A message with a null header value and a repeated name also has "header_list", exactly."""
    kafka_headers = adiskq.Headers([("n", None), ("t", b"1"), ("t", b"\xff")])
    fill(stream_path, [adiskq.Record(b"v", key="k", headers=kafka_headers, timestamp=T0)])
    result = invoke("read", stream_path)
    assert result.exit_code == 0
    (line,) = lines(result.stdout)
    assert line["headers"] == {"n": "", "t": base64.b64encode(b"\xff").decode()}
    assert line["header_list"] == [["n", None], ["t", "1"], ["t", base64.b64encode(b"\xff").decode(), "base64"]]


def test_bytes_that_are_not_utf8_are_base64_and_marked(stream_path: str) -> None:
    """A key, value or header that is not UTF-8 is base64, and a field says which."""
    raw = b"\xff\x00\xfe"
    fill(stream_path, [adiskq.Record(raw, key=raw, headers={"bin": raw, "text": b"ok"})])
    (line,) = lines(invoke("read", stream_path).stdout)
    encoded = base64.b64encode(raw).decode()
    assert (line["key"], line["value"]) == (encoded, encoded)
    assert line["headers"] == {"bin": encoded, "text": "ok"}
    assert line["key_encoding"] == line["value_encoding"] == "base64"
    assert line["headers_encoding"] == {"bin": "base64"}


def test_utf8_text_is_kept_as_text(stream_path: str) -> None:
    """Non-ASCII UTF-8 is written as itself, with no encoding fields."""
    fill(stream_path, [adiskq.Record("héllo wörld".encode(), key="clé")])
    (line,) = lines(invoke("read", stream_path).stdout)
    assert (line["key"], line["value"]) == ("clé", "héllo wörld")
    assert not any(name.endswith("_encoding") for name in line)


def test_value_format_prints_raw_values_one_per_line(three_partitions: str) -> None:
    """`--format value` prints only the values' bytes, each followed by a newline."""
    result = invoke("read", three_partitions, "--format", "value")
    assert result.stdout_bytes == b"m0\nm1\nm2\nm3\nm4\nm5\n"


def test_pretty_format_shows_where_when_key_headers_and_value(stream_path: str) -> None:
    """`--format pretty` is for people: partition, offset, time, key and headers, then the value."""
    fill(stream_path, [adiskq.Record(b"hello", key="k", headers={"type": b"created"}, timestamp=T0)])
    result = invoke("read", stream_path, "--format", "pretty")
    assert result.stdout == ("partition 0 · offset 0 · 2026-01-01 00:00:00.000 UTC · key k · type=created\nhello\n")


def test_partitions_are_merged_by_timestamp(three_partitions: str) -> None:
    """All partitions are read, merged in timestamp order."""
    read = lines(invoke("read", three_partitions).stdout)
    assert [x["value"] for x in read] == ["m0", "m1", "m2", "m3", "m4", "m5"]
    assert [x["partition"] for x in read] == [0, 1, 2, 0, 1, 2]


def test_partition_option_reads_only_those(three_partitions: str) -> None:
    """`--partition` (repeatable) limits the read."""
    read = lines(invoke("read", three_partitions, "-p", "2", "-p", "0").stdout)
    assert [(x["partition"], x["offset"]) for x in read] == [(0, 0), (2, 0), (0, 1), (2, 1)]


def test_a_partition_the_stream_lacks_is_misuse(three_partitions: str) -> None:
    """Asking for partition 3 of a three-partition stream is a usage error that names the range."""
    result = invoke("read", three_partitions, "-p", "3")
    assert result.exit_code == 2
    assert "the stream has partitions 0..2, not 3" in result.stderr


def test_start_and_end_offsets_bound_each_partition(three_partitions: str) -> None:
    """`--start 1 --end 2` reads offset 1 of each partition (the end is exclusive)."""
    read = lines(invoke("read", three_partitions, "--start", "1", "--end", "2").stdout)
    assert [(x["partition"], x["offset"]) for x in read] == [(0, 1), (1, 1), (2, 1)]


def test_start_and_end_times_bound_the_read(three_partitions: str) -> None:
    """ISO-8601 times pick the first message at or after them (without a zone: UTC)."""
    result = invoke("read", three_partitions, "--start", "2026-01-01T00:00:02", "--end", "2026-01-01T00:00:04Z")
    assert [x["value"] for x in lines(result.stdout)] == ["m2", "m3"]


def test_start_time_with_an_offset_zone(three_partitions: str) -> None:
    """A time with a zone is converted: 01:00:03+01:00 is 00:00:03 UTC."""
    result = invoke("read", three_partitions, "--start", "2026-01-01T01:00:03+01:00")
    assert [x["value"] for x in lines(result.stdout)] == ["m3", "m4", "m5"]


def test_start_newest_reads_nothing_without_follow(three_partitions: str) -> None:
    """From the newest position there is nothing yet to read."""
    result = invoke("read", three_partitions, "--start", "newest")
    assert (result.exit_code, result.stdout) == (0, "")


def test_limit_stops_after_that_many(three_partitions: str) -> None:
    """`--limit N` prints N messages."""
    result = invoke("read", three_partitions, "--limit", "4", "--format", "value")
    assert result.stdout == "m0\nm1\nm2\nm3\n"


def test_a_bad_start_is_misuse_saying_what_is_accepted(three_partitions: str) -> None:
    """An unreadable --start is a usage error listing the accepted forms."""
    result = invoke("read", three_partitions, "--start", "yesterday")
    assert result.exit_code == 2
    assert "use oldest, newest, active-oldest, an offset such as 42, or an ISO-8601 time" in result.stderr


def test_an_end_of_oldest_is_misuse(three_partitions: str) -> None:
    """--end takes an offset, a time or newest."""
    assert invoke("read", three_partitions, "--end", "oldest").exit_code == 2


def test_the_help_of_end_lists_what_it_takes() -> None:
    """--end's help names newest, an offset or a time, and not oldest, which it refuses."""
    result = invoke("read", "--help")
    assert "--end newest|OFFSET|TIME" in result.stdout
    refused = invoke("read", "x", "--end", "oldest")
    assert "use newest, an offset such as 42, or an ISO-8601 time" in refused.stderr


def test_the_help_of_start_lists_active_oldest() -> None:
    """--start's metavar names every position it takes, active-oldest included."""
    result = invoke("read", "--help")
    assert "--start oldest|active-oldest|newest|OFFSET|TIME" in result.stdout


def test_offsets_deleted_by_retention_are_skipped_with_a_warning(stream_path: str) -> None:
    """Starting before the oldest retained offset reads from the oldest, and says what was gone."""
    fill(stream_path, [b"x" * 100] * 40, segment_size_bytes=1024, one_at_a_time=True)
    oldest_before = adiskq.stats(stream_path).partitions[0]
    assert oldest_before.segments > 2
    invoke("vacuum", stream_path, "--max-bytes", "1500")
    oldest = adiskq.stats(stream_path).partitions[0].oldest_offset
    assert oldest > 0
    result = invoke("read", stream_path, "--start", "0", "--format", "value")
    assert result.exit_code == 0
    assert len(result.stdout.splitlines()) == 40 - oldest
    assert f"warning: partition 0: offsets 0..{oldest - 1} were deleted by retention; reading on from {oldest}" in (
        result.stderr
    )


def test_group_and_partition_together_are_misuse(three_partitions: str) -> None:
    """A group reads the partitions the group is given, so --partition makes no sense with it."""
    result = invoke("read", three_partitions, "--group", "billing", "-p", "0")
    assert result.exit_code == 2


def test_an_invalid_group_name_is_misuse(three_partitions: str) -> None:
    """Group names become folder names: one that would leave its folder is refused."""
    result = invoke("read", three_partitions, "--group", "../escape")
    assert result.exit_code == 2
    assert "invalid consumer group name" in result.stderr


def test_follow_with_an_end_time_is_misuse(three_partitions: str) -> None:
    """A followed read ends at an offset, not at a time."""
    result = invoke("read", three_partitions, "--follow", "--end", "2026-01-01T00:00:00Z")
    assert result.exit_code == 2


def test_reading_into_a_closed_pipe_ends_quietly(stream_path: str) -> None:
    """`adiskq read S | head -1` prints one line, and adiskq ends with status 0 and nothing on stderr."""
    fill(stream_path, [b"message %06d" % i for i in range(20_000)])  # far more than a pipe holds
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", f'"{sys.executable}" -m adiskq read "{stream_path}" | head -1'],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert json.loads(done.stdout)["value"] == "message 000000"


@pytest.mark.parametrize("output", ["json", "value", "pretty"])
def test_every_format_ends_quietly_when_the_reader_goes_away(stream_path: str, output: str) -> None:
    """Closing the pipe after one line stops the reader with status 0, whatever the format."""
    fill(stream_path, [b"message %06d" % i for i in range(20_000)])
    child = subprocess.Popen(
        [sys.executable, "-m", "adiskq", "read", stream_path, "--format", output],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None
    assert child.stderr is not None
    assert child.stdout.readline()
    child.stdout.close()
    assert child.wait(timeout=60) == 0
    assert child.stderr.read() == b""
    child.stderr.close()


def test_reading_what_is_there_needs_no_event_loop(three_partitions: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read without --follow or --group goes through the synchronous storage layer only."""
    import anyio

    def no_loop(*args: object, **kwargs: object) -> None:
        raise AssertionError("an event loop was started")

    monkeypatch.setattr(anyio, "run", no_loop)
    assert invoke("read", three_partitions).exit_code == 0


def test_a_message_read_back_matches_the_library(three_partitions: str) -> None:
    """The JSON timestamp is the message's own, to the nanosecond."""
    (line,) = lines(invoke("read", three_partitions, "-p", "1", "--limit", "1").stdout)
    message = adiskq.read(three_partitions, 1, 0)
    stamp = dt.datetime.fromisoformat(str(line["timestamp"]).replace("Z", "+00:00"))
    assert stamp == message.timestamp
    assert str(line["timestamp"]).endswith(f"{message.timestamp_ns % SECOND:09d}Z")


@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(
    key=st.binary(max_size=12) | st.text(max_size=12).map(str.encode),
    value=st.binary(max_size=40) | st.text(max_size=40).map(str.encode),
    headers=st.dictionaries(st.text(max_size=8), st.binary(max_size=8) | st.text(max_size=8).map(str.encode))
    | st.lists(st.tuples(st.sampled_from(["a", "b", "é"]), st.none() | st.binary(max_size=8)), max_size=5).map(
        adiskq.Headers
    ),
    timestamp_ns=st.integers(min_value=-(2**62), max_value=2**62),
)
def test_json_lines_are_the_json_of_the_documented_object(
    key: bytes, value: bytes, headers: dict[str, bytes] | adiskq.Headers, timestamp_ns: int
) -> None:
    """The fast JSON line is exactly json.dumps of the documented object, for any bytes."""
    message = adiskq.Message(2, 7, timestamp_ns, key, value, headers)
    expected = json.dumps(message_json(message), ensure_ascii=False, separators=(", ", ": "))
    assert json_line(message) == (expected + "\n").encode("utf-8")
    assert json.loads(json_line(message))["partition"] == 2
