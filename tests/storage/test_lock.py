"""The owner lock: one producer per stream, in this process or any other; a dead holder leaves none."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import pytest

import adiskq
from adiskq import StreamLockedError
from adiskq._storage.stream import StreamWriter

HOLDER = textwrap.dedent(
    """
    import sys
    from adiskq._storage.stream import StreamWriter
    writer = StreamWriter.open(sys.argv[1], partitions=2)
    print("holding", flush=True)
    for line in sys.stdin:
        if line.strip() == "close":
            writer.close()
            print("closed", flush=True)
    """
)

CONTENDER = textwrap.dedent(
    """
    import sys
    from adiskq import StreamLockedError
    from adiskq._storage.stream import StreamWriter
    try:
        StreamWriter.open(sys.argv[1]).close()
    except StreamLockedError as error:
        print("locked", error.holder)
    else:
        print("opened")
    """
)


class Holder:
    """A child process that holds a stream's lock until told to close, or killed."""

    def __init__(self, path: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", HOLDER, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self._line() == "holding"

    def _line(self) -> str:
        assert self.process.stdout is not None
        return self.process.stdout.readline().strip()

    def close(self) -> None:
        """Tell the child to close its writer, and wait until it has."""
        assert self.process.stdin is not None
        self.process.stdin.write("close\n")
        self.process.stdin.flush()
        assert self._line() == "closed"

    def kill(self) -> None:
        """SIGKILL the child and reap it."""
        self.process.send_signal(signal.SIGKILL)
        assert self.process.wait(timeout=30) == -signal.SIGKILL

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()


@pytest.fixture
def holder(stream_path: str) -> Iterator[Holder]:
    """Another process holding the stream's owner lock."""
    child = Holder(stream_path)
    try:
        yield child
    finally:
        child.stop()


def test_second_writer_in_this_process_is_refused(stream_path: str) -> None:
    """A second StreamWriter in the same process gets StreamLockedError naming this pid and host."""
    first = StreamWriter.open(stream_path)
    try:
        with pytest.raises(StreamLockedError) as caught:
            StreamWriter.open(stream_path)
        assert caught.value.holder == f"pid {os.getpid()} on host {socket.gethostname()!r}"
        assert f"pid {os.getpid()}" in str(caught.value)
        assert "lock_timeout" in str(caught.value)
    finally:
        first.close()


def test_writer_in_another_process_is_refused(stream_path: str, holder: Holder) -> None:
    """A StreamWriter while another process holds the lock is refused, naming that process."""
    with pytest.raises(StreamLockedError) as caught:
        StreamWriter.open(stream_path)
    assert caught.value.holder == f"pid {holder.process.pid} on host {socket.gethostname()!r}"


def test_other_process_is_refused_by_this_one(stream_path: str) -> None:
    """While this process holds the lock, a writer in another process is refused and told who holds it."""
    writer = StreamWriter.open(stream_path)
    try:
        result = subprocess.run(
            [sys.executable, "-c", CONTENDER, stream_path], capture_output=True, text=True, check=True, timeout=60
        )
    finally:
        writer.close()
    assert result.stdout.strip() == f"locked pid {os.getpid()} on host {socket.gethostname()!r}"


def test_killed_holder_leaves_no_stale_lock(stream_path: str, holder: Holder) -> None:
    """After SIGKILL of the holder, the next writer opens at once (the kernel dropped the flock)."""
    with pytest.raises(StreamLockedError):
        StreamWriter.open(stream_path)
    holder.kill()
    writer = StreamWriter.open(stream_path, lock_timeout=0.0)
    writer.close()
    assert adiskq.stats(stream_path).owner is None


def test_stats_names_the_live_owner(stream_path: str, holder: Holder) -> None:
    """stats() reports the pid and host of the producer holding the stream."""
    owner = adiskq.stats(stream_path).owner
    assert owner is not None
    assert (owner["pid"], owner["host"]) == (holder.process.pid, socket.gethostname())
    holder.close()
    assert adiskq.stats(stream_path).owner is None


def test_lock_timeout_waits_for_the_holder_to_close(
    stream_path: str, holder: Holder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With lock_timeout, a writer retries until the holder closes, then opens."""
    real_sleep = time.sleep
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        # The first retry is where the holder goes away: the open must have failed once by then.
        if not waits:
            holder.close()
        waits.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", sleep)
    writer = StreamWriter.open(stream_path, lock_timeout=60)
    writer.close()
    assert waits


def test_lock_timeout_gives_up_after_the_timeout(stream_path: str, holder: Holder) -> None:
    """With a short lock_timeout and a holder that stays, the writer gives up with StreamLockedError."""
    started = time.monotonic()
    with pytest.raises(StreamLockedError, match=f"pid {holder.process.pid}"):
        StreamWriter.open(stream_path, lock_timeout=0.2)
    assert time.monotonic() - started >= 0.2


def test_close_releases_the_lock(stream_path: str) -> None:
    """After close (twice is harmless), another writer opens at once."""
    writer = StreamWriter.open(stream_path)
    writer.close()
    writer.close()
    StreamWriter.open(stream_path).close()


def test_failed_open_releases_the_lock(stream_path: str) -> None:
    """A writer whose open fails after taking the lock releases it."""
    StreamWriter.open(stream_path, partitions=3).close()
    with pytest.raises(adiskq.SettingsMismatchError):
        StreamWriter.open(stream_path, partitions=2)
    StreamWriter.open(stream_path).close()
