"""A real small file system for the disk-full and disk-usage tests: a tmpfs mounted as root.

``mounted_small_disk`` mounts one and unmounts it afterwards (CI runs as root); ``use_up_space``
and ``fill_to`` fill it with a file of their own, so a test can put usage where it wants it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from collections.abc import Iterator

import pytest

import adiskq

SMALL_DISK_SIZE = "384k"


@contextlib.contextmanager
def mounted_small_disk(parent: str, size: str = SMALL_DISK_SIZE) -> Iterator[str]:
    """A tmpfs of ``size`` mounted in a new folder of ``parent``; unmounted on exit."""
    mount_point = os.path.join(parent, "small-disk")
    os.mkdir(mount_point)
    if os.geteuid() != 0:
        pytest.fail("the full-disk tests mount a tmpfs and must run as root (CI does); run them as root")
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", mount_point], check=True)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", mount_point], check=True)


def use_up_space(directory: str) -> None:
    """Write a filler file until not one more byte fits (cut-backs may have freed a page)."""
    chunk = b"f" * 512
    with open(os.path.join(directory, "filler"), "ab", buffering=0) as filler:
        while len(chunk) == 512:
            try:
                filler.write(chunk)
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise
                chunk = b""


def usage(directory: str) -> float:
    """How full the file system is, as ``df`` counts it (used over used plus available)."""
    disk = shutil.disk_usage(directory)
    return disk.used / (disk.used + disk.free)


def fill_to(directory: str, level: float) -> None:
    """Grow a filler file in ``directory`` until the file system is at least ``level`` full."""
    with open(os.path.join(directory, "filler"), "ab", buffering=0) as filler:
        while usage(directory) < level:
            filler.write(b"f" * 4096)
            os.fsync(filler.fileno())


def remove_filler(directory: str) -> None:
    """Delete what ``fill_to`` or ``use_up_space`` wrote."""
    os.unlink(os.path.join(directory, "filler"))


async def fill(producer: adiskq.Producer, acknowledged: list[bytes]) -> OSError:
    """Push until a push fails (the disk is full, or its usage is above the producer's level);
    returns the error that said so. Each acknowledged value is appended to ``acknowledged``."""
    for i in range(100_000):
        value = b"%06d" % i + b"x" * 250
        try:
            await producer.push(value, key="k")
        except OSError as error:
            return error
        acknowledged.append(value)
    raise AssertionError("the small disk never filled up")
