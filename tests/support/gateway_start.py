"""Waiting for an ``adiskq serve`` started as a subprocess to listen, and learning its port.

The gateway prints ``listening on HOST:PORT`` on stderr once it answers clients. Its log may say
other things first (a start without transaction state reads its topics' data and says so; a topic
creation a kill cut short is reported), so the line is looked for, not assumed to come first.
"""

from __future__ import annotations

import re
from typing import IO

__all__ = ["listening_port"]

_LISTENING = re.compile(r"listening on 127\.0\.0\.1:(\d+)")


def listening_port(stderr: IO[str] | IO[bytes]) -> int:
    """The port of the gateway whose stderr this is, read up to its ``listening on`` line;
    AssertionError with every line it printed if it exits before (its stderr ends)."""
    lines: list[str] = []
    while raw := stderr.readline():
        line = raw.decode() if isinstance(raw, bytes) else raw
        lines.append(line)
        found = _LISTENING.search(line)
        if found:
            return int(found.group(1))
    raise AssertionError(f"adiskq serve did not start: {''.join(lines)!r}")
