"""What the gateway's start says while it looks through its topics' data for transactions left open.

A start that finds no transaction state (``kafka-transactions.json``: the first start after an
upgrade to a version with transactions, or a state file lost) reads every record of every topic
that can hold a transaction once, before it answers anyone: on a large root that takes minutes, so
it says so in the gateway's log (the one ``adiskq serve`` prints), as its other steps do: a line
when it begins (how much there is to read), a line every ``_EVERY_SECONDS`` while it reads (how far
it got), and a line when it is done (what it read, how long it took, what it aborted).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Final

__all__ = ["SearchProgress"]

logger = logging.getLogger("adiskq.kafka")

_EVERY_SECONDS: Final = 5.0


class SearchProgress:
    """The log lines of one search; ``advance`` may be called from worker threads."""

    def __init__(
        self, state_file: str, topics: int, partitions: int, records: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.records = records
        self.read = 0
        self.aborted = 0
        self._clock = clock
        self._started = self._last = clock()
        self._lock = threading.Lock()
        logger.info(
            "adiskq: no transaction state (%s): reading the %d records of %d topics (%d partitions) once, "
            "for transactions left open, before answering clients",
            state_file,
            records,
            topics,
            partitions,
        )

    def advance(self, records: int) -> None:
        """``records`` more were read; a progress line if the last is ``_EVERY_SECONDS`` old."""
        with self._lock:
            self.read += records
            now = self._clock()
            if now - self._last < _EVERY_SECONDS:
                return
            self._last = now
            read, elapsed = self.read, now - self._started
        logger.info(
            "adiskq: read %d of %d records (%d%%) for transactions left open, %.0f s so far",
            read,
            self.records,
            100 * read // max(1, self.records),
            elapsed,
        )

    def finished(self) -> None:
        """The closing line: what was read, in how long, and how many transactions were aborted."""
        logger.info(
            "adiskq: read %d records for transactions left open in %.1f s; %d aborted",
            self.read,
            self._clock() - self._started,
            self.aborted,
        )
