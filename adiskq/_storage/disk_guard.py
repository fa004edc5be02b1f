"""Refusing writes above a disk-usage level (RocketMQ's disk warning level), measured cheaply.

Usage is measured as ``df`` shows it: used bytes over the bytes this process could ever use (used
plus available), so 100% is exactly where a write fails with ENOSPC, also on file systems that keep
blocks in reserve for root (ext4 keeps 5%), where used over the raw size never reaches 100%.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

from .._errors import DiskUsageRefusedError, InvalidArgumentError
from .._sansio.retention import DEFAULT_REFUSE_WRITES_ABOVE, DiskUsage
from .stream import disk_usage

__all__ = ["DEFAULT_REFUSE_WRITES_ABOVE", "DiskGuard", "check_refuse_level"]


# statvfs costs about 1.5 µs here; at most ten a second is nothing next to pushes of several µs
# each (what every push pays is a subtraction and a clock read, ~0.1 µs). The interval bounds what
# *other* writers on the same file system can add unseen: 100 ms of a fast disk's throughput (tens
# of MB), far less than the headroom a level leaves on any disk large enough to hold a stream worth
# guarding (5% of 10 GiB is 512 MiB). Should they fill it anyway, the push meets a real ENOSPC,
# which the write path survives (README's guarantees table).
MEASURE_INTERVAL_NS: Final = 100_000_000
# And our own writes: after a measurement, at most this share of the headroom left below the
# level is written before the next one, so this producer alone can never step over the level by
# more than the one call that crosses it, however fast it pushes and however small the headroom.
_BUDGET_SHARE: Final = 4


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
    measurements it costs a subtraction and a clock read; while usage is at or above the level
    every call measures again, so writing resumes with the first call after space is freed.
    """

    __slots__ = ("_budget_bytes", "_clock", "_measure", "_next_measure_ns", "level", "path")

    def __init__(
        self,
        path: str,
        level: float,
        *,
        measure: Callable[[str], DiskUsage] = disk_usage,
        clock: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        self.path = path
        self.level = level
        self._measure = measure
        self._clock = clock
        self._budget_bytes = -1  # measure at the first write
        self._next_measure_ns = 0

    def admit(self, size_bytes: int) -> None:
        """Let a write of ``size_bytes`` through, or raise ``DiskUsageRefusedError`` (nothing written)."""
        self._budget_bytes -= size_bytes
        if self._budget_bytes < 0 or self._clock() >= self._next_measure_ns:
            self.measure()
            self._budget_bytes -= size_bytes  # this write is the first to spend the new budget

    def measure(self) -> DiskUsage:
        """Measure usage now; ``DiskUsageRefusedError`` at or above the level."""
        usage = self._measure(self.path)
        allowed = self.level * usage.total_bytes
        if usage.total_bytes <= 0 or usage.used_bytes >= allowed:
            self._budget_bytes = -1  # refused: the next write measures again
            raise DiskUsageRefusedError(self.path, self.level, usage.used_bytes, usage.total_bytes)
        self._budget_bytes = int(allowed - usage.used_bytes) // _BUDGET_SHARE
        self._next_measure_ns = self._clock() + MEASURE_INTERVAL_NS
        return usage
