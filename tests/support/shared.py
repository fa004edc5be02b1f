"""Shared-producer processes for the tests: start them, collect their receipts, kill them, check."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import adiskq
from adiskq._storage.stream import StreamReader

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


LIVE: list[Writer] = []


def dump_stacks() -> None:
    """Every live writer prints its threads' stacks (to the test's stderr), and the held locks: what
    a hung test needs to be understood."""
    for writer in LIVE:
        if writer.child.poll() is None:
            print(f"--- writer {writer.name}, pid {writer.child.pid}", file=sys.stderr, flush=True)
            writer.child.send_signal(signal.SIGUSR1)
            time.sleep(0.5)  # diagnostics of a failed test, not a wait for an event
    with open("/proc/locks") as locks:
        print(locks.read(), file=sys.stderr, flush=True)


class Writer:
    """``tests.support.shared_producer`` in a child process; its receipt lines gathered by a thread."""

    def __init__(self, path: str, flush: str, backend: str, name: str, count: int | None = None) -> None:
        args = [sys.executable, "-m", "tests.support.shared_producer", path, flush, backend, name]
        if count is not None:
            args.append(str(count))
        self.name = name
        self.lines: list[str] = []
        self.opened = threading.Event()
        self.changed = threading.Condition()
        self.child = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, text=True)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        LIVE.append(self)

    def _read(self) -> None:
        assert self.child.stdout is not None
        for line in self.child.stdout:
            if not line.endswith("\n"):
                break  # torn by the kill: not acknowledged
            if line == "open\n":
                self.opened.set()
            elif line != "done\n":
                with self.changed:
                    self.lines.append(line)
                    self.changed.notify_all()
        with self.changed:
            self.changed.notify_all()

    def wait_for_lines(self, count: int, timeout: float = 60) -> None:
        """Wait until ``count`` receipts came (or the child exited)."""
        with self.changed:
            done = self.changed.wait_for(lambda: len(self.lines) >= count or not self._thread.is_alive(), timeout)
        if not done:
            dump_stacks()
        assert done, f"writer {self.name} acknowledged {len(self.lines)} of {count} in {timeout} s"

    def kill(self) -> list[str]:
        """SIGKILL the child; every complete line it printed (those still in the pipe included)."""
        self.child.send_signal(signal.SIGKILL)
        return self.finish()

    def finish(self, timeout: float = 120) -> list[str]:
        """Wait for the child to end; its receipts."""
        self.child.wait(timeout=timeout)
        if self in LIVE:
            LIVE.remove(self)
        self._thread.join(timeout=30)
        assert self.child.stdout is not None
        self.child.stdout.close()
        return list(self.lines)


def receipts(lines: list[str]) -> dict[tuple[int, int], bytes]:
    """``(partition, offset) -> value`` of receipt lines; an offset acknowledged twice fails."""
    found: dict[tuple[int, int], bytes] = {}
    for line in lines:
        partition, offset, value = line.split()
        key = (int(partition), int(offset))
        assert key not in found, f"offset {key} acknowledged twice"
        found[key] = value.encode()
    return found


def check_stream(path: str, acknowledged: dict[tuple[int, int], bytes]) -> dict[tuple[int, int], bytes]:
    """Every offset of every partition reads back (contiguous), no value twice, every acknowledged
    message at its offset, no writer left listed; returns everything stored."""
    stats = adiskq.stats(path)
    assert stats.writers == (), f"stale writers: {stats.writers}"
    assert stats.owner is None
    stored: dict[tuple[int, int], bytes] = {}
    stream = StreamReader.open(path)
    for partition in stats.partitions:
        assert partition.oldest_offset == 0
        expected = 0
        with stream.partition(partition.partition).cursor(0) as cursor:
            while batch := cursor.read(1000):
                for message in batch:
                    assert message.offset == expected  # contiguous: no gap
                    stored[(message.partition, message.offset)] = message.value
                    expected += 1
        assert expected == partition.next_offset
    assert len(set(stored.values())) == len(stored), "a message was stored twice"
    wrong = {key: value for key, value in acknowledged.items() if stored.get(key) != value}
    assert not wrong, f"acknowledged messages not read back at their offsets: {list(wrong.items())[:5]}"
    return stored
