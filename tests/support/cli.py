"""Helpers of the command-line tests: streams with known content, and the CLI run three ways.

``invoke`` runs a command in-process through click's test runner; ``run`` runs ``python -m adiskq``
in a subprocess; ``run_as_nobody`` runs it in a subprocess as the unprivileged user ``nobody``.
"""

from __future__ import annotations

import contextlib
import glob
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence

import anyio
from click.testing import CliRunner, Result

import adiskq
from adiskq._storage.stream import StreamWriter
from adiskq.cli import cli

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fill(
    path: str,
    records: Sequence[adiskq.Record | bytes],
    *,
    partitions: int | None = None,
    segment_size_bytes: int | None = None,
    retention: adiskq.Retention | None = None,
    one_at_a_time: bool = False,
) -> list[adiskq.Receipt]:
    """Push the records through a real producer (asyncio) and close it.

    ``one_at_a_time`` pushes each record on its own, so segments roll between them (a batch is
    never split across segments).
    """

    async def push() -> list[adiskq.Receipt]:
        async with adiskq.Producer(
            path, partitions=partitions, segment_size_bytes=segment_size_bytes, retention=retention
        ) as producer:
            if not one_at_a_time:
                return await producer.push_many(list(records))
            receipts = []
            for record in records:
                if isinstance(record, bytes):
                    record = adiskq.Record(record)
                receipts.append(
                    await producer.push(
                        record.value, key=record.key, headers=record.headers, timestamp=record.timestamp
                    )
                )
            return receipts

    return anyio.run(push)


def invoke(*args: str, input: bytes | str | None = None) -> Result:
    """Run one command in-process; exceptions the boundary lets through fail the test."""
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def run(*args: str, input: bytes | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m adiskq ARGS`` in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "adiskq", *args],
        input=input.decode() if input is not None else None,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
        check=False,
    )


def run_as_nobody(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the command line as the user ``nobody`` (``tests/support/unprivileged.py``, where every test that
    runs code as another user goes)."""
    from support.unprivileged import run_as_nobody as run

    return run(*args)


@contextlib.contextmanager
def producer_open(path: str) -> Iterator[StreamWriter]:
    """Hold the stream's owner lock, as an open producer does."""
    writer = StreamWriter.open(path)
    try:
        yield writer
    finally:
        writer.close()


def segment_files(path: str, partition: int, extension: str) -> list[str]:
    """The files of one kind of a partition's segments, oldest first."""
    return sorted(glob.glob(os.path.join(path, "parts", f"{partition:06d}", f"*.{extension}")))


def flip_byte(path: str, position: int) -> None:
    """Damage one byte of a file in place."""
    with open(path, "r+b") as file:
        file.seek(position)
        byte = file.read(1)
        file.seek(position)
        file.write(bytes([byte[0] ^ 0xFF]))


def append(path: str, data: bytes) -> None:
    """Add bytes at the end of a file (a torn write, when they are not a whole record)."""
    with open(path, "ab") as file:
        file.write(data)
