"""DiskGuard: when it measures the file system, and what it lets through (a fake disk)."""

from __future__ import annotations

import pytest

import adiskq
from adiskq._sansio.retention import DiskUsage
from adiskq._storage.disk_guard import MEASURE_EVERY_BYTES, DiskGuard, check_refuse_level


class FakeDisk:
    """A file system of ``size_bytes`` whose use a test sets, counting the measurements taken."""

    def __init__(self, used_bytes: int, size_bytes: int = 1000) -> None:
        self.used_bytes = used_bytes
        self.size_bytes = size_bytes
        self.measurements = 0

    def measure(self, path: str) -> DiskUsage:
        self.measurements += 1
        return DiskUsage(self.size_bytes, self.used_bytes)


def guard(disk: FakeDisk, level: float = 0.9) -> DiskGuard:
    return DiskGuard("/stream", level, measure=disk.measure)


def test_the_first_write_measures_and_later_ones_within_the_budget_do_not() -> None:
    """One statvfs serves many writes: none again until the budget is spent."""
    disk = FakeDisk(used_bytes=500)
    checked = guard(disk)
    for _ in range(90):  # the budget is a quarter of the 400 bytes left below the level
        checked.admit(1)
    assert disk.measurements == 1


def test_writing_a_quarter_of_the_headroom_measures_again() -> None:
    """Our own writes never run past the level unseen: a quarter of the headroom spent, it measures."""
    disk = FakeDisk(used_bytes=500)
    checked = guard(disk)
    checked.admit(100)
    checked.admit(1)
    assert disk.measurements == 2


def test_on_a_large_disk_it_measures_again_every_16_mib() -> None:
    """Other writers on the file system are seen within 16 MiB of this producer's writes."""
    disk = FakeDisk(used_bytes=0, size_bytes=2**40)
    checked = guard(disk)
    checked.admit(1)
    checked.admit(MEASURE_EVERY_BYTES - 1)
    assert disk.measurements == 1
    disk.used_bytes = 2**40 - 1
    with pytest.raises(adiskq.DiskUsageRefusedError):
        checked.admit(1)
    assert disk.measurements == 2


def test_while_refused_every_write_measures_so_writing_resumes_at_once() -> None:
    """A refused guard measures on every call, and lets the first write after space is freed through."""
    disk = FakeDisk(used_bytes=900)
    checked = guard(disk)
    for _ in range(3):
        with pytest.raises(adiskq.DiskUsageRefusedError):
            checked.admit(1)
    disk.used_bytes = 899
    checked.admit(1)
    assert disk.measurements == 4


def test_the_refusal_carries_the_level_and_the_usage() -> None:
    """The error is an ENOSPC OSError with the numbers it was decided on, and pickles whole."""
    import errno
    import pickle

    disk = FakeDisk(used_bytes=955)
    with pytest.raises(adiskq.DiskUsageRefusedError) as caught:
        guard(disk, level=0.95).admit(1)
    error = caught.value
    assert isinstance(error, OSError)
    assert error.errno == errno.ENOSPC
    assert (error.path, error.level, error.used_bytes, error.size_bytes) == ("/stream", 0.95, 955, 1000)
    assert error.usage == pytest.approx(0.955)
    assert "95.5% full (955 bytes of 1000 bytes used)" in str(error)
    assert str(pickle.loads(pickle.dumps(error))) == str(error)


@pytest.mark.parametrize(("given", "kept"), [(None, None), (1.0, None), (1, None), (0.95, 0.95), (0.5, 0.5)])
def test_none_and_one_turn_the_check_off(given: float | None, kept: float | None) -> None:
    """None and 1.0 mean no check; any other fraction in (0, 1) is kept."""
    assert check_refuse_level(given) == kept
