"""Helpers of the consumer-group tests: a gateway in a thread, consumer processes to watch and kill."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

from anyio.from_thread import start_blocking_portal
from support.gateway_start import listening_port

from adiskq.kafka import GroupOptions, KafkaGateway, SecurityOptions

# Members in tests use short sessions, so a killed one is expelled within about a second, and a
# group's first generation starts at once (no 3 s wait for more members, Kafka's default).
TEST_GROUPS = GroupOptions(min_session_timeout_ms=100, initial_rebalance_delay_ms=0)
SESSION_CONFIG = {"session.timeout.ms": 1000, "heartbeat.interval.ms": 100}
MEMBER_SCRIPT = os.path.join(os.path.dirname(__file__), "group_member.py")


@contextlib.contextmanager
def running_gateway(
    root: str,
    backend: str,
    *,
    port: int = 0,
    security: SecurityOptions | None = None,
    partitions: int = 4,
    groups: GroupOptions = TEST_GROUPS,
) -> Iterator[KafkaGateway]:
    """A gateway serving ``root`` in a thread (its own event loop on ``backend``) for the block."""
    with start_blocking_portal(backend=backend) as portal:
        gateway = KafkaGateway(root, port=port, partitions=partitions, groups=groups, security=security)
        with portal.wrap_async_context_manager(gateway):
            yield gateway


def bootstrap(gateway: KafkaGateway) -> str:
    """``bootstrap.servers`` for a client of this gateway."""
    return f"127.0.0.1:{gateway.port}"


class MemberProcess:
    """A confluent-kafka consumer in its own process (``group_member.py``), reporting as JSON lines."""

    def __init__(self, bootstrap_servers: str, topic: str, group: str, strategy: str) -> None:
        # librdkafka's log, and a traceback if the member dies; closed by kill() or stop().
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115
        self.process = subprocess.Popen(
            [sys.executable, MEMBER_SCRIPT, bootstrap_servers, topic, group, strategy],
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        self.assignment: list[int] = []
        self.values: set[bytes] = set()
        self._events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        with self.process.stdout:
            for line in self.process.stdout:
                self._events.put(json.loads(line))
        self._events.put(None)

    def drain(self, timeout: float) -> bool:
        """Take the events reported within ``timeout`` seconds; False if none came."""
        try:
            event = self._events.get(timeout=timeout)
        except queue.Empty:
            return False
        while event is not None:
            if "assignment" in event:
                self.assignment = event["assignment"]
            if "value" in event:
                self.values.add(event["value"].encode())
            try:
                event = self._events.get_nowait()
            except queue.Empty:
                break
        return True

    def check_alive(self) -> None:
        """AssertionError with the end of the member's log if its process has ended."""
        if self.process.poll() is not None:
            self._stderr.seek(0)
            log = self._stderr.read().decode(errors="replace")
            raise AssertionError(f"a member process exited with {self.process.returncode}: ...{log[-3000:]}")

    def log_tail(self, size: int = 2000) -> str:
        """The end of the member's log so far ("" once closed). Read with pread: the member's
        process writes through the same open file, so moving its offset would garble the log."""
        if self._stderr.closed:
            return ""
        fd = self._stderr.fileno()
        length = os.fstat(fd).st_size
        return os.pread(fd, size, max(0, length - size)).decode(errors="replace")

    def kill(self) -> None:
        """SIGKILL: no LeaveGroup, no commit; the gateway must notice by the session timeout."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        self._reader.join(timeout=30)
        self._stderr.close()

    def stop(self) -> None:
        """Ask the member to close (LeaveGroup) and wait for it."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=30)
        self._reader.join(timeout=30)
        self._stderr.close()


def wait_for(condition: Any, members: list[MemberProcess], *, timeout: float = 60.0, what: str) -> None:
    """Drain the members' reports until ``condition()`` holds; AssertionError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            logs = "".join(f"\n--- member {number}'s log:\n{m.log_tail()}" for number, m in enumerate(members))
            raise AssertionError(
                f"timed out waiting for {what}: {[(m.assignment, len(m.values)) for m in members]}{logs}"
            )
        for member in members:
            member.drain(0.05)


class ServeProcess:
    """``adiskq serve`` in a subprocess; ``port`` from the line it logs when it listens."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "adiskq",
                "serve",
                *args,
                "--kafka",
                "127.0.0.1:0",
                "--group-initial-rebalance-delay-ms",
                "0",
            ],
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.process.stderr is not None
        self.port = listening_port(self.process.stderr)  # blocks until it listens (or exits)

    def kill(self) -> None:
        """SIGKILL: nothing is flushed or closed after this instant."""
        self.stop(signal.SIGKILL)

    def stop(self, signum: int = signal.SIGTERM) -> int:
        """Send ``signum`` (SIGTERM: a clean stop), then its exit status."""
        self.process.send_signal(signum)
        status = self.process.wait(timeout=30)
        assert self.process.stderr is not None
        self.process.stderr.close()
        return status
