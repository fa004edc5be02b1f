"""How much a process's memory grows over repeated work: the leak tests of the compiled code."""

from __future__ import annotations

import gc
from collections.abc import Callable

import psutil


def rss() -> int:
    """This process's resident memory in bytes, after a collection."""
    gc.collect()
    return int(psutil.Process().memory_info().rss)


def growth_over(one_round: Callable[[], None], rounds: int = 10) -> int:
    """Bytes resident memory grew by over ``rounds`` calls of ``one_round``, after two that warm up
    (caches, interned objects and the allocator's arenas are in place before the first reading)."""
    one_round()
    one_round()
    before = rss()
    for _ in range(rounds):
        one_round()
    return rss() - before
