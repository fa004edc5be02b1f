"""`adiskq write`: messages from stdin or a file, one per line or length-delimited."""

from __future__ import annotations

import json
import os
import pathlib
import struct
import subprocess
import sys

from support.cli import fill, invoke

import adiskq
from adiskq._sansio.naming import partition_for_key


def values(path: str) -> list[bytes]:
    """Every value of the stream, partition by partition, in offset order."""
    stats = adiskq.stats(path)
    return [
        adiskq.read(path, p.partition, offset).value
        for p in stats.partitions
        for offset in range(p.oldest_offset, p.next_offset)
    ]


def test_each_line_of_stdin_becomes_a_message(stream_path: str) -> None:
    """Every line, without its newline, is one message; the count is reported."""
    result = invoke("write", stream_path, input=b"alpha\nbeta\ngamma\n")
    assert result.exit_code == 0, result.output
    assert result.stdout == f"wrote 3 messages to {stream_path}: partition 0 offsets 0..2\n"
    assert values(stream_path) == [b"alpha", b"beta", b"gamma"]


def test_a_last_line_without_newline_is_a_message(stream_path: str) -> None:
    """Input that does not end in a newline loses nothing."""
    invoke("write", stream_path, input=b"one\ntwo")
    assert values(stream_path) == [b"one", b"two"]


def test_empty_lines_are_empty_messages(stream_path: str) -> None:
    """An empty line is a message with an empty value, not skipped."""
    invoke("write", stream_path, input=b"a\n\nb\n")
    assert values(stream_path) == [b"a", b"", b"b"]


def test_bytes_that_are_not_utf8_are_kept_exactly(stream_path: str) -> None:
    """Lines are bytes: nothing is decoded or changed on the way in."""
    invoke("write", stream_path, input=b"\xff\xfe\x00raw\r\n")
    assert values(stream_path) == [b"\xff\xfe\x00raw\r"]


def test_empty_input_writes_nothing_and_says_so(stream_path: str) -> None:
    """No input, no messages, and a sentence saying so."""
    result = invoke("write", stream_path, input=b"")
    assert result.exit_code == 0
    assert "wrote no messages" in result.stdout


def test_a_file_argument_is_read_instead_of_stdin(stream_path: str, tmp_path: pathlib.Path) -> None:
    """`adiskq write PATH FILE` takes the messages from FILE."""
    source = tmp_path / "input.txt"
    source.write_bytes(b"".join(b"line %d\n" % i for i in range(2500)))
    result = invoke("write", stream_path, str(source))
    assert result.exit_code == 0, result.output
    assert "wrote 2,500 messages" in result.stdout
    assert values(stream_path) == [b"line %d" % i for i in range(2500)]


def test_a_missing_input_file_is_misuse(stream_path: str, tmp_path: pathlib.Path) -> None:
    """An input file that does not exist is a usage error, and no stream is created."""
    result = invoke("write", stream_path, str(tmp_path / "missing.txt"))
    assert result.exit_code == 2
    assert not os.path.exists(stream_path)


def test_partitions_sets_the_partition_count_of_a_new_stream(stream_path: str) -> None:
    """`--partitions N` creates the stream with N partitions."""
    invoke("write", stream_path, "--partitions", "4", input=b"x\n")
    assert len(adiskq.stats(stream_path).partitions) == 4


def test_a_fixed_key_puts_every_message_on_its_partition(stream_path: str) -> None:
    """`--key K` gives every message key K, so all land on K's partition, in order."""
    result = invoke("write", stream_path, "-p", "3", "--key", "customer-00", input=b"a\nb\nc\n")
    assert result.exit_code == 0
    partition = partition_for_key(b"customer-00", 3)
    assert [adiskq.read(stream_path, partition, o).key for o in range(3)] == [b"customer-00"] * 3
    assert f"partition {partition} offsets 0..2" in result.stdout


def test_key_field_takes_each_key_from_the_json_line(stream_path: str) -> None:
    """`--key-field F` keys each JSON line by its field F (numbers as their JSON text)."""
    lines = [{"customer": "c-1", "n": 1}, {"customer": 7, "n": 2}]
    invoke("write", stream_path, "--key-field", "customer", input="".join(json.dumps(x) + "\n" for x in lines))
    first, second = adiskq.read(stream_path, 0, 0), adiskq.read(stream_path, 0, 1)
    assert (first.key, second.key) == (b"c-1", b"7")
    assert json.loads(first.value) == lines[0]


def test_key_field_stops_at_a_line_without_it_keeping_what_came_before(stream_path: str) -> None:
    """A line that is not JSON with the field fails the command; the lines before it are written."""
    result = invoke("write", stream_path, "--key-field", "id", input=b'{"id": 1}\n{"id": 2}\nnot json\n{"id": 4}\n')
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "Error: message 3 (line 3) is not JSON, so --key-field 'id' cannot be read from it; "
        "the 2 messages before it were written, nothing after it"
    )
    assert values(stream_path) == [b'{"id": 1}', b'{"id": 2}']


def test_key_and_key_field_together_are_misuse(stream_path: str) -> None:
    """One key for all, or a key per message: asking for both is a usage error."""
    result = invoke("write", stream_path, "--key", "a", "--key-field", "b", input=b"x\n")
    assert result.exit_code == 2
    assert not os.path.exists(stream_path)


def test_headers_are_added_to_every_message(stream_path: str) -> None:
    """`-H NAME=VALUE` (repeatable) sets headers on every message."""
    invoke("write", stream_path, "-H", "type=created", "-H", "source=cli", input=b"a\nb\n")
    for offset in range(2):
        assert dict(adiskq.read(stream_path, 0, offset).headers) == {"type": b"created", "source": b"cli"}


def test_a_header_without_equals_is_misuse(stream_path: str) -> None:
    """A header must be NAME=VALUE."""
    result = invoke("write", stream_path, "-H", "nonsense", input=b"a\n")
    assert result.exit_code == 2
    assert "NAME=VALUE" in result.stderr


def frame(value: bytes) -> bytes:
    return struct.pack("<I", len(value)) + value


def test_binary_input_is_length_delimited(stream_path: str) -> None:
    """With --binary each message is a u32 little-endian length and its bytes: newlines and empties kept."""
    messages = [b"with\nnewline", b"", b"\x00\xff" * 100]
    result = invoke("write", stream_path, "--binary", input=b"".join(map(frame, messages)))
    assert result.exit_code == 0, result.output
    assert values(stream_path) == messages


def test_binary_input_cut_inside_a_frame_fails_after_writing_whole_ones(stream_path: str) -> None:
    """A truncated last frame is reported with its byte position; the whole frames before it are written."""
    data = frame(b"complete") + frame(b"truncated")[:-3]
    result = invoke("write", stream_path, "--binary", input=data)
    assert result.exit_code == 1
    assert "the input ends inside a message at byte 12" in result.stderr
    assert values(stream_path) == [b"complete"]


def test_writing_appends_to_an_existing_stream(stream_path: str) -> None:
    """A stream that exists gets the new messages after its own."""
    fill(stream_path, [b"old"])
    result = invoke("write", stream_path, input=b"new\n")
    assert "partition 0 offset 1" in result.stdout
    assert values(stream_path) == [b"old", b"new"]


def test_sync_flush_writes_the_same_messages(stream_path: str) -> None:
    """`--flush sync` only changes durability, not what is written."""
    invoke("write", stream_path, "--flush", "sync", input=b"a\nb\n")
    assert values(stream_path) == [b"a", b"b"]


def test_lines_from_a_slow_pipe_are_written_as_they_arrive(stream_path: str) -> None:
    """`tail -f log | adiskq write S`: each line is in the stream while the input is still open."""
    import subprocess
    import sys

    from support.waiting import wait_for

    from adiskq._storage.stream import StreamWriter

    StreamWriter.open(stream_path).close()  # the stream exists, so its partition folder can be watched
    writer = subprocess.Popen(
        [sys.executable, "-m", "adiskq", "write", stream_path], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert writer.stdin is not None
    try:
        for expected, line in enumerate([b"first\n", b"second\n"], start=1):
            writer.stdin.write(line)
            writer.stdin.flush()
            wait_for(
                lambda expected=expected: adiskq.stats(stream_path).message_count == expected,  # type: ignore[misc]
                f"line {expected} written while the input stayed open",
                [os.path.join(stream_path, "parts", "000000")],
                processes=[writer],
            )
        writer.stdin.close()
        assert writer.wait(timeout=20) == 0
        assert writer.stdout is not None
        out = writer.stdout.read()
        writer.stdout.close()
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    assert out == f"wrote 2 messages to {stream_path}: partition 0 offsets 0..1\n".encode()
    assert values(stream_path) == [b"first", b"second"]


def test_a_key_or_header_name_that_is_not_utf8_is_a_usage_error(stream_path: str) -> None:
    """Argument bytes that are not UTF-8 (`--key $'\\xff'`, `-H $'\\xff=v'`) are a usage error naming
    the option, not a crash; nothing is written. A header value is bytes: any are kept."""
    fill(stream_path, [b"seed"])
    for args, option in ((["--key", b"\xff"], "'--key'"), (["-H", b"\xff=v"], "'--header' / '-H'")):
        result = subprocess.run(
            [sys.executable, "-m", "adiskq", "write", stream_path, *args],
            input=b"x\n",
            capture_output=True,
            check=False,
        )
        assert result.returncode == 2, result.stderr
        last_line = result.stderr.decode().strip().splitlines()[-1]
        assert last_line.startswith(f"Error: Invalid value for {option}: the ")
        assert "'\\xff' is not valid UTF-8" in last_line
    assert values(stream_path) == [b"seed"]
    invoke("write", stream_path, "-H", "raw=\udcff", input=b"x\n")
    assert adiskq.read(stream_path, 0, 1).headers == {"raw": b"\xff"}


def test_key_field_with_a_lone_surrogate_names_the_line_and_keeps_the_lines_before(stream_path: str) -> None:
    """A --key-field value UTF-8 cannot store (a JSON \\ud800 escape) fails the command naming its
    line; the lines before it are written and the message says so."""
    result = invoke("write", stream_path, "--key-field", "k", input=b'{"k": "ok"}\n{"k": "\\ud800"}\n{"k": "no"}\n')
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "Error: message 2 (line 2): its --key-field 'k' value '\\ud800' is not valid UTF-8: give it as UTF-8 "
        "text (a JSON \\u escape of a lone surrogate); the 1 messages before it were written, nothing after it"
    )
    assert values(stream_path) == [b'{"k": "ok"}']


def test_key_field_null_is_named_as_null_not_as_missing(stream_path: str) -> None:
    """`{"k": null}` has a k field whose value is null: said so, not "no k field"."""
    result = invoke("write", stream_path, "--key-field", "k", input=b'{"k": 1}\n{"k": null}\n')
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "Error: message 2 (line 2) has 'k': null, which is no key: give every message a 'k' value; "
        "the 1 messages before it were written, nothing after it"
    )
    missing = invoke("write", stream_path, "--key-field", "k", input=b'{"j": 1}\n')
    assert "message 1 (line 1) is not a JSON object with a 'k' field" in missing.stderr
