"""A process that holds locks of a stream and is stopped (SIGSTOP) while it holds them, for the
tests of what the others do then: time out naming it, or go on."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class StoppedHolder:
    """``tests.support.lock_holder`` in a child, stopped once it said it holds its locks."""

    def __init__(self, stream_path: str, *names: str) -> None:
        self.child = subprocess.Popen(
            [sys.executable, "-m", "tests.support.lock_holder", stream_path, *names],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.pid = self.child.pid
        try:
            assert self._line(30) == "held\n", "the lock holder did not take its locks"
            os.kill(self.pid, signal.SIGSTOP)
            _, status = os.waitpid(self.pid, os.WUNTRACED)  # returns once it is stopped
            assert os.WIFSTOPPED(status)
        except BaseException:
            self.end()
            raise

    def _line(self, timeout: float) -> str:
        assert self.child.stdout is not None
        ready, _, _ = select.select([self.child.stdout], [], [], timeout)
        return self.child.stdout.readline() if ready else ""

    def resume_and_release(self) -> None:
        """Continue it, and wait until it has let go of its locks."""
        os.kill(self.pid, signal.SIGCONT)
        assert self.child.stdin is not None
        self.child.stdin.write("release\n")
        self.child.stdin.flush()
        assert self._line(30) == "released\n", "the lock holder did not let go"
        self.child.wait(timeout=30)

    def end(self) -> None:
        """Continue and kill it (teardown: nothing stays stopped or alive)."""
        if self.child.poll() is None:
            os.kill(self.pid, signal.SIGCONT)
            self.child.kill()
        self.child.wait(timeout=30)
        for pipe in (self.child.stdin, self.child.stdout):
            if pipe is not None:
                pipe.close()


@contextmanager
def stopped_holder(stream_path: str, *names: str) -> Iterator[StoppedHolder]:
    """A stopped process holding these locks of the stream, continued and killed on the way out."""
    holder = StoppedHolder(stream_path, *names)
    try:
        yield holder
    finally:
        holder.end()
