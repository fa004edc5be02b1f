"""A producer's background work on a timer (the ``flush="async"`` fsync, the periodic vacuum).

Each is blocking file work, so it runs in a small daemon thread of its own rather than in a task
group: a producer then never holds a task group open around its caller's code (which would let a
background failure cancel that code, and would tie ``aclose()`` to the scope that opened it).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Final

__all__ = ["Periodic"]

logger: Final = logging.getLogger("adiskq.producer")


class Periodic:
    """A daemon thread that calls ``action`` every ``interval`` seconds until stopped."""

    def __init__(self, name: str, interval: float, action: Callable[[], None]) -> None:
        self._interval = interval
        self._action = action
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stopping.wait(self._interval):
            try:
                self._action()
            except Exception:  # a background failure is logged, never fatal to the producer
                logger.exception("adiskq: %s failed", self._thread.name)

    def stop(self) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join()
