"""`adiskq find PATH --key K`: a key's messages, in offset order, in `adiskq read`'s formats."""

from __future__ import annotations

import base64
import json

import pytest
from support.cli import fill, invoke

import adiskq

T0 = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z
SECOND = 1_000_000_000


@pytest.fixture
def stream(stream_path: str) -> str:
    """Sixty messages over three keys (and one binary key) in three partitions of small segments."""
    records = [adiskq.Record(b"m%d" % i, key=f"key-{i % 3}", timestamp=T0 + i * SECOND) for i in range(60)]
    records.append(adiskq.Record(b"binary", key=b"\xff\x00", timestamp=T0))
    fill(stream_path, records, partitions=3, segment_size_bytes=1024, one_at_a_time=True)
    return stream_path


def lines(output: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in output.splitlines()]


def test_find_prints_the_keys_messages_as_read_does(stream: str) -> None:
    """The same JSON lines `adiskq read` prints for those messages, in offset order."""
    found = invoke("find", stream, "--key", "key-1")
    assert found.exit_code == 0
    read = invoke("read", stream)
    expected = sorted((m for m in lines(read.stdout) if m["key"] == "key-1"), key=lambda m: m["offset"])  # type: ignore[arg-type, return-value]
    assert lines(found.stdout) == expected
    assert [m["value"] for m in lines(found.stdout)] == [f"m{i}" for i in range(1, 60, 3)]


def test_find_bounds_by_time_and_count(stream: str) -> None:
    """--since (inclusive), --until (exclusive) and --limit select as adiskq.find does."""
    result = invoke(
        "find", stream, "-k", "key-0", "--since", "2026-01-01T00:00:09Z", "--until", "2026-01-01T00:00:30", "-n", "3"
    )
    assert result.exit_code == 0
    assert [m["value"] for m in lines(result.stdout)] == ["m9", "m12", "m15"]


def test_find_prints_values_and_pretty(stream: str) -> None:
    """--format value prints raw values; pretty names partition, offset and key."""
    values = invoke("find", stream, "--key", "key-2", "--limit", "2", "--format", "value")
    assert values.stdout == "m2\nm5\n"
    (first,) = adiskq.find(stream, "key-2", limit=1)
    pretty = invoke("find", stream, "--key", "key-2", "--limit", "1", "--format", "pretty")
    assert pretty.stdout.splitlines()[0].startswith(f"partition {first.partition} · offset {first.offset} · ")
    assert pretty.stdout.splitlines()[0].endswith(" · key key-2")
    assert pretty.stdout.splitlines()[1] == "m2"


def test_find_takes_a_binary_key_as_base64(stream: str) -> None:
    """A key that is not UTF-8 is given as read prints it: base64, with --base64."""
    key = base64.b64encode(b"\xff\x00").decode()
    result = invoke("find", stream, "--key", key, "--base64")
    assert result.exit_code == 0
    assert [(m["value"], m["key_encoding"]) for m in lines(result.stdout)] == [("binary", "base64")]


def test_find_of_a_key_that_is_not_utf8_is_a_usage_error(stream: str) -> None:
    """`find --key $'\\xff'` (argument bytes that are not UTF-8) is a usage error pointing at --base64."""
    result = invoke("find", stream, "--key", "\udcff")  # what click makes of the argument byte 0xff
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "Error: Invalid value for '--key': the key '\\xff' is not valid UTF-8: give it as UTF-8 text, or as --base64"
    )


def test_find_of_an_unknown_key_prints_nothing(stream: str) -> None:
    """No message has the key: no output, exit status 0."""
    result = invoke("find", stream, "--key", "nobody")
    assert (result.exit_code, result.stdout) == (0, "")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--key", "%%%", "--base64"], "is not base64"),
        (["--key", "k", "--since", "yesterday"], "is not a time"),
        (["--key", "k", "--limit", "0"], "--limit"),
        ([], "Missing option '--key'"),
    ],
)
def test_find_refuses_bad_arguments(stream: str, arguments: list[str], message: str) -> None:
    """Misuse is exit status 2 with a message naming the option."""
    result = invoke("find", stream, *arguments)
    assert result.exit_code == 2
    assert message in result.stderr


def test_find_in_a_missing_stream_says_so(tmp_path: object) -> None:
    """No stream at the path: exit status 1 and a one-line error."""
    result = invoke("find", f"{tmp_path}/nothing", "--key", "k")
    assert result.exit_code == 1
    assert "no adiskq stream" in result.stderr
