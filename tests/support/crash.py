"""Running a program that acknowledges pushes line by line, and killing it mid-flight."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_and_kill(module: str, args: list[str], lines_before_kill: int) -> list[str]:
    """Start ``python -m module *args``, wait for ``open`` and some acknowledgement lines, SIGKILL it.

    Returns every complete line it printed: those read before the kill, and those still in the pipe
    (acknowledged too); a line the kill tore was not complete, so it does not count.
    """
    child = subprocess.Popen([sys.executable, "-m", module, *args], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    receipts: list[str] = []
    try:
        assert child.stdout.readline().strip() == "open"
        while len(receipts) < lines_before_kill:
            line = child.stdout.readline()
            assert line, "the producer exited early"
            receipts.append(line)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        # Read on through the same buffered pipe: communicate() would skip what readline() buffered.
        rest = child.stdout.read()
        child.stdout.close()
    receipts.extend(line + "\n" for line in rest.split("\n")[:-1])
    return receipts
