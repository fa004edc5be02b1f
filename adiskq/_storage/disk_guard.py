"""Refusing writes above a disk-usage level (RocketMQ's disk warning level), measured cheaply.

Usage is measured as ``df`` shows it: used bytes over the bytes this process could ever use (used
plus available), so 100% is exactly where a write fails with ENOSPC, also on file systems that keep
blocks in reserve for root (ext4 keeps 5%), where used over the raw size never reaches 100%.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from .._errors import DiskUsageRefusedError, InvalidArgumentError
from .._sansio.retention import DEFAULT_REFUSE_WRITES_ABOVE, DiskUsage
from .stream import disk_usage

__all__ = ["DEFAULT_REFUSE_WRITES_ABOVE", "DiskGuard", "check_refuse_level"]


# After each measurement, at most a quarter of the headroom left below the level, and at most
# MEASURE_EVERY_BYTES, is written before the next one. So this producer alone never steps over the
# level by more than the one call that crosses it, however fast it pushes and however small the
# headroom. Shared producers write one at a time, each in its turn (``locks/turn``), and each
# measures again at the start of every turn (``forget``): a budget measured before others wrote
# would not know of their writes (eight producers, each spending a quarter of the headroom it had
# measured long before, met a real ENOSPC on a small disk); and the space *other* writers on the
# file system take is seen within 16 MiB of our own writes (should they fill the disk first, the
# push meets a real ENOSPC, which the write path survives: README's guarantees table). A measurement
# (statvfs) is one system call, so one per 16 MiB is nothing; what every push pays is one
# subtraction and one comparison, a small share of a push. No clock is read: that alone would cost
# as much as the rest of the check (measured: see benchmarks/RESULTS.md, section "Figures the code
# relies on", F10).
MEASURE_EVERY_BYTES: Final = 16 * 2**20
_HEADROOM_SHARE: Final = 4


def check_refuse_level(level: object) -> float | None:
    """The level as a float, or None when the check is off (None or 1.0); InvalidArgumentError otherwise."""
    if level is None:
        return None
    if isinstance(level, bool) or not isinstance(level, int | float) or not 0.0 < level <= 1.0:
        raise InvalidArgumentError(
            f"refuse_writes_above={level!r}: give a fraction of the file system's size above 0 and up "
            f"to 1, such as the default {DEFAULT_REFUSE_WRITES_ABOVE}; None or 1.0 turns the check off"
        )
    return None if level == 1.0 else float(level)


class DiskGuard:
    """Refuses writes while the file system holding ``path`` is fuller than ``level``.

    ``admit(size_bytes)`` is called before each write (on one thread, the event loop's). Between
    measurements it costs a subtraction and a comparison; while usage is at or above the level
    every call measures again, so writing resumes with the first call after space is freed.
    """

    __slots__ = ("_measure", "budget_bytes", "level", "path")

    def __init__(self, path: str, level: float, *, measure: Callable[[str], DiskUsage] = disk_usage) -> None:
        self.path = path
        self.level = level
        self._measure = measure
        self.budget_bytes = -1  # measure at the first write

    def admit(self, size_bytes: int) -> None:
        """Let a write of ``size_bytes`` through, or raise ``DiskUsageRefusedError`` (nothing written).

        A caller on a hot path may spell it out (``push`` does, a call less): subtract from
        ``budget_bytes``, and call ``over_budget`` when that leaves it below 0."""
        self.budget_bytes -= size_bytes
        if self.budget_bytes < 0:
            self.over_budget(size_bytes)

    def over_budget(self, size_bytes: int) -> None:
        """``admit``'s measurement, once a write of ``size_bytes`` has spent the budget: a new
        budget, which this write is the first to spend, or ``DiskUsageRefusedError``."""
        self.measure()
        self.budget_bytes -= size_bytes

    def forget(self) -> None:
        """Others may have written since the last measurement (a shared producer's new turn): the
        next write measures again."""
        self.budget_bytes = -1

    def measure(self) -> DiskUsage:
        """Measure usage now; ``DiskUsageRefusedError`` at or above the level."""
        usage = self._measure(self.path)
        allowed = self.level * usage.total_bytes
        if usage.total_bytes <= 0 or usage.used_bytes >= allowed:
            self.budget_bytes = -1  # refused: the next write measures again
            raise DiskUsageRefusedError(self.path, self.level, usage.used_bytes, usage.total_bytes)
        self.budget_bytes = min(MEASURE_EVERY_BYTES, int(allowed - usage.used_bytes) // _HEADROOM_SHARE)
        return usage
