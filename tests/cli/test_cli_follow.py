"""`adiskq read --follow` stays open like `tail -f`; `adiskq read --group` resumes and commits."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from support.cli import fill, invoke

import adiskq
from adiskq._sansio.naming import partition_for_key
from adiskq._storage.offsets import load_offsets, save_offsets

DEADLINE_SECONDS = 20


class Reader:
    """`python -m adiskq read ...` in a subprocess, whose output lines are awaited with a deadline."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "adiskq", "read", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert self.process.stdout is not None
        self._out = self.process.stdout
        self._buffer = b""

    def line(self) -> str:
        """The next line it prints; fails the test if none comes before the deadline."""
        line = self.line_within(DEADLINE_SECONDS)
        assert line is not None, f"no line within {DEADLINE_SECONDS} s"
        return line

    def line_within(self, seconds: float) -> str | None:
        """The next line it prints, or None if none comes within ``seconds``."""
        deadline = time.monotonic() + seconds
        with selectors.DefaultSelector() as selector:
            selector.register(self._out, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                if selector.select(left):
                    chunk = os.read(self._out.fileno(), 65536)
                    assert chunk, f"the reader ended: {self.finish()}"
                    self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()

    def lines(self, count: int) -> list[str]:
        return [self.line() for _ in range(count)]

    def finish(self, *, interrupt: bool = False, signum: int = signal.SIGINT) -> tuple[int, str]:
        """Stop it (with Ctrl-C, or ``signum``, if asked) and return its exit status and stderr."""
        if interrupt:
            self.process.send_signal(signum)
        self._out.close()
        assert self.process.stderr is not None
        returncode = self.process.wait(timeout=DEADLINE_SECONDS)
        stderr = self.process.stderr.read().decode()
        self.process.stderr.close()
        return returncode, stderr

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None and not stream.closed:
                stream.close()


@pytest.fixture
def reader() -> Iterator[list[Reader]]:
    """Readers started by a test, killed at its end if still running."""
    started: list[Reader] = []
    yield started
    for each in started:
        each.kill()


def start(started: list[Reader], *args: str) -> Reader:
    made = Reader(*args)
    started.append(made)
    return made


def test_follow_prints_messages_pushed_after_it_started(stream_path: str, reader: list[Reader]) -> None:
    """`--follow` prints what is there, then each message as it is pushed, until Ctrl-C."""
    fill(stream_path, [b"before"], partitions=2)
    follower = start(reader, stream_path, "--follow", "--format", "value")
    assert follower.line() == "before"
    for value in (b"after-1", b"after-2"):
        fill(stream_path, [value])
        assert follower.line() == value.decode()
    returncode, stderr = follower.finish(interrupt=True)
    assert (returncode, stderr) == (130, "")


def test_follow_sees_partitions_added_while_it_runs(stream_path: str, reader: list[Reader]) -> None:
    """A partition added to the stream after `--follow` started is followed too."""
    fill(stream_path, [b"first"], partitions=1)
    follower = start(reader, stream_path, "--follow")
    assert json.loads(follower.line())["value"] == "first"
    key = next(k for k in (f"k{i}" for i in range(100)) if partition_for_key(k.encode(), 3) == 2)
    fill(stream_path, [adiskq.Record(b"on a new partition", key=key)], partitions=3)
    line = json.loads(follower.line())
    assert (line["partition"], line["value"]) == (2, "on a new partition")


def test_follow_with_a_limit_ends_after_that_many(stream_path: str, reader: list[Reader]) -> None:
    """`--follow --limit N` waits for N messages, prints them and exits 0."""
    fill(stream_path, [b"one"])
    follower = start(reader, stream_path, "--follow", "--limit", "2", "--format", "value")
    assert follower.line() == "one"
    fill(stream_path, [b"two", b"three"])
    assert follower.line() == "two"
    returncode, stderr = follower.finish()
    assert (returncode, stderr) == (0, "")


def test_follow_to_an_end_offset_stops_there(stream_path: str, reader: list[Reader]) -> None:
    """`--follow --partition 0 --end 3` waits until offset 2 is printed, then exits 0."""
    fill(stream_path, [b"0"])
    follower = start(reader, stream_path, "-f", "-p", "0", "--end", "3", "--format", "value")
    assert follower.line() == "0"
    fill(stream_path, [b"1", b"2", b"3"])
    assert follower.lines(2) == ["1", "2"]
    assert follower.finish() == (0, "")


def test_follow_from_newest_prints_only_new_messages(stream_path: str, reader: list[Reader]) -> None:
    """`--start newest` skips what was there before: the first line is a message pushed later."""
    fill(stream_path, [b"old"])
    follower = start(reader, stream_path, "-f", "--start", "newest", "--format", "value")
    # It prints nothing until it is open, so push until something comes (a push before it opened
    # is, rightly, not printed).
    deadline = time.monotonic() + DEADLINE_SECONDS
    line = None
    while line is None:
        assert time.monotonic() < deadline, "nothing printed"
        fill(stream_path, [b"new"])
        line = follower.line_within(0.5)
    assert line == "new"


def test_follow_ends_quietly_once_its_pipe_is_closed(stream_path: str, reader: list[Reader]) -> None:
    """After the reader of its output goes away, the next message ends `--follow` with status 0."""
    fill(stream_path, [b"one"])
    follower = start(reader, stream_path, "--follow", "--format", "value")
    assert follower.line() == "one"
    follower._out.close()
    fill(stream_path, [b"two"])
    assert follower.process.wait(timeout=DEADLINE_SECONDS) == 0
    assert follower.process.stderr is not None
    assert follower.process.stderr.read() == b""


def test_a_group_read_commits_what_it_printed(stream_path: str) -> None:
    """`--group` prints from the group's commits to the end and commits; a second run prints nothing new."""
    fill(stream_path, [adiskq.Record(b"v%d" % i, key="aaa") for i in range(5)], partitions=2)
    first = invoke("read", stream_path, "--group", "billing", "--format", "value")
    assert first.stdout == "v0\nv1\nv2\nv3\nv4\n"
    written = partition_for_key(b"aaa", 2)
    # The empty partition's commit is where the group starts there (0), stored so lag can count it.
    assert load_offsets(stream_path, "billing") == {written: 5, 1 - written: 0}
    assert invoke("read", stream_path, "--group", "billing").stdout == ""
    fill(stream_path, [adiskq.Record(b"v5", key="aaa")])
    assert invoke("read", stream_path, "--group", "billing", "--format", "value").stdout == "v5\n"


def test_a_group_read_with_a_limit_commits_only_what_it_printed(stream_path: str) -> None:
    """`--group --limit 2` commits two messages; the next run goes on with the third."""
    fill(stream_path, [b"v%d" % i for i in range(5)])
    assert invoke("read", stream_path, "-g", "billing", "-n", "2", "-o", "value").stdout == "v0\nv1\n"
    assert load_offsets(stream_path, "billing") == {0: 2}
    assert invoke("read", stream_path, "-g", "billing", "-o", "value").stdout == "v2\nv3\nv4\n"


def test_a_group_resumes_from_offsets_moved_by_the_offsets_command(stream_path: str) -> None:
    """`adiskq offsets --reset-to` decides where the next `read --group` starts."""
    fill(stream_path, [b"v%d" % i for i in range(5)])
    save_offsets(stream_path, "billing", {0: 5})
    invoke("offsets", stream_path, "-g", "billing", "--reset-to", "3")
    assert invoke("read", stream_path, "-g", "billing", "-o", "value").stdout == "v3\nv4\n"


def test_a_followed_group_commits_on_ctrl_c(stream_path: str, reader: list[Reader]) -> None:
    """`--group --follow` commits what it printed when it is interrupted."""
    fill(stream_path, [b"a"])
    follower = start(reader, stream_path, "--group", "billing", "--follow", "--format", "value")
    assert follower.line() == "a"
    fill(stream_path, [b"b"])
    assert follower.line() == "b"
    assert follower.finish(interrupt=True) == (130, "")
    assert load_offsets(stream_path, "billing") == {0: 2}


def test_a_followed_group_stops_cleanly_on_sigterm(stream_path: str, reader: list[Reader]) -> None:
    """A service manager's SIGTERM ends `--group --follow` like Ctrl-C: commits stored, status 143."""
    fill(stream_path, [b"a", b"b"])
    follower = start(reader, stream_path, "--group", "billing", "--follow", "--format", "value")
    assert follower.lines(2) == ["a", "b"]
    assert follower.finish(interrupt=True, signum=signal.SIGTERM) == (128 + signal.SIGTERM, "")
    assert load_offsets(stream_path, "billing") == {0: 2}


def test_a_group_never_commits_what_a_closed_pipe_did_not_take(stream_path: str) -> None:
    """`read --group | head -1`: the group commits no more than was written before the pipe closed."""
    total = 20_000
    fill(stream_path, [b"message %06d" % i for i in range(total)])
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", f'"{sys.executable}" -m adiskq read "{stream_path}" -g billing | head -1'],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    committed = load_offsets(stream_path, "billing").get(0, 0)
    assert committed < total
    again = invoke("read", stream_path, "-g", "billing", "-o", "value")
    assert again.stdout.splitlines()[0] == f"message {committed:06d}"
