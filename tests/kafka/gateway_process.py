"""A Kafka gateway in a process of its own, for tests that watch it from outside (its memory, its
file descriptors): ``python gateway_process.py ROOT BACKEND PARTITIONS [NOFILE] [shared]``.

It sets its RLIMIT_NOFILE to NOFILE when given (soft and hard: the gateway raises its soft limit
to the hard one as it starts; ``SOFT,HARD`` sets each), serves ROOT on a free port of 127.0.0.1 on
BACKEND (asyncio or trio), prints the port on stdout once it listens, logs to stderr, and serves
until its stdin closes (so it never outlives the test that started it); ``shared`` writes the streams
as a shared producer (``--shared``). ``GatewayProcess`` runs it.
"""

from __future__ import annotations

import logging
import pathlib
import resource
import subprocess
import sys
from typing import IO

import anyio
import anyio.to_thread

from adiskq.kafka import KafkaGateway


class GatewayProcess:
    """The gateway of this module in a subprocess; ``port`` once it listens; its log in ``log_path``."""

    def __init__(
        self,
        root: pathlib.Path,
        backend: str,
        *,
        partitions: int = 1,
        nofile: int | tuple[int, int] | None = None,
        shared: bool = False,
    ) -> None:
        self.log_path = root.with_name(root.name + "-gateway.log")
        self._log: IO[bytes] = open(self.log_path, "wb")  # noqa: SIM115 (closed in stop)
        args = [sys.executable, __file__, str(root), backend, str(partitions)]
        if nofile is not None:
            args.append(",".join(map(str, nofile)) if isinstance(nofile, tuple) else str(nofile))
        if shared:
            args.append("shared")
        self.process = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # blocks until it listens (or exits: then b"")
        assert line.strip().isdigit(), f"the gateway did not start: {line!r}\n{self.log()}"
        self.port = int(line)

    @property
    def bootstrap(self) -> str:
        """``bootstrap.servers`` for a client."""
        return f"127.0.0.1:{self.port}"

    def memory_kib(self) -> tuple[int, int]:
        """(VmRSS, VmHWM) of the gateway process in KiB, from /proc: now, and the peak so far."""
        fields = {}
        for line in pathlib.Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            fields[name] = value
        return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])

    def open_files_limits(self) -> tuple[int, int]:
        """The gateway process's (soft, hard) open-files limits, from /proc."""
        for line in pathlib.Path(f"/proc/{self.process.pid}/limits").read_text().splitlines():
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return int(soft), int(hard)
        raise AssertionError("no open-files limit in /proc/PID/limits")

    def open_descriptors(self) -> int:
        """How many file descriptors the gateway process has open."""
        return len(list(pathlib.Path(f"/proc/{self.process.pid}/fd").iterdir()))

    def check_alive(self) -> None:
        """Fail with the gateway's log when it has exited."""
        assert self.process.poll() is None, f"the gateway exited ({self.process.returncode}):\n{self.log()}"

    def log(self) -> str:
        """What the gateway logged so far."""
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self) -> int:
        """Close its stdin (it stops serving cleanly) and return its exit status."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            status = self.process.wait(timeout=60)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            self._log.close()
            if self.process.stdout is not None:
                self.process.stdout.close()
        return status

    def __enter__(self) -> GatewayProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


async def _serve(root: str, partitions: int, shared: bool) -> None:
    async with KafkaGateway(root, port=0, partitions=partitions, shared=shared) as gateway:
        print(gateway.port, flush=True)
        # stdin closes when the test stops it (or dies): then the gateway closes cleanly.
        await anyio.to_thread.run_sync(sys.stdin.buffer.read, abandon_on_cancel=True)


def main() -> None:
    """Serve as the arguments say (see the module's docstring)."""
    root, backend, partitions = sys.argv[1], sys.argv[2], int(sys.argv[3])
    options = sys.argv[4:]
    shared = "shared" in options
    limits = [option for option in options if option != "shared"]
    if limits:
        soft, *hard = (int(limit) for limit in limits[0].split(","))
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard[0] if hard else soft))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    anyio.run(_serve, root, partitions, shared, backend=backend)


if __name__ == "__main__":
    main()
