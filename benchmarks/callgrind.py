"""Instruction counts under ``valgrind --tool=callgrind``: the one helper of every benchmark that counts.

Timings on a shared machine move with its load; instruction counts do not (the same binary, inputs
and environment give the same count), so the hot paths are measured in instructions. Two ways:

- ``count(argv)``: the instructions a whole command ran (callgrind's ``Collected`` total, which it
  prints on exit). A benchmark runs its work twice, with N items and with none, and divides the
  difference by N: start-up is excluded.
- a long-running server: ``command(argv, out_file=..., at_start=False)`` starts it with the
  instrumentation off, ``instrument(pid, True)`` (after ``zero(pid)``) and ``instrument(pid, False)``
  bracket the part measured, and ``totals(out_file)`` reads the count once it has exited.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence

__all__ = ["MISSING", "command", "count", "instrument", "require", "totals", "zero"]

MISSING = "valgrind is not installed (Debian: apt-get install valgrind)"


def require() -> None:
    """Exit saying what to install when valgrind is not on PATH."""
    if shutil.which("valgrind") is None:
        raise SystemExit(MISSING)


def command(
    argv: Sequence[str], *, out_file: str = "/dev/null", at_start: bool = True, log_file: str | None = None
) -> list[str]:
    """``argv`` under callgrind (instrumented from the start, or only once ``instrument`` turns it on)."""
    options = ["--tool=callgrind", f"--callgrind-out-file={out_file}"]
    if not at_start:
        options.append("--instr-atstart=no")
    if log_file is not None:
        options.append(f"--log-file={log_file}")
    return ["valgrind", *options, *argv]


def count(argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None) -> int:
    """The instructions ``argv`` ran, start to exit, as callgrind counts them."""
    done = subprocess.run(command(argv), capture_output=True, text=True, env=env, cwd=cwd, check=False)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"callgrind failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return int(found.group(1))


def zero(pid: int) -> None:
    """Reset the counts of the callgrind-run process ``pid``."""
    subprocess.run(["callgrind_control", "-z", str(pid)], check=True, capture_output=True)


def instrument(pid: int, on: bool) -> None:
    """Turn the instrumentation of the callgrind-run process ``pid`` on or off."""
    subprocess.run(["callgrind_control", "-i", "on" if on else "off", str(pid)], check=True, capture_output=True)


def totals(out_file: str) -> int:
    """The instructions a callgrind run counted, from its output file (written when it exits)."""
    with open(out_file) as file:
        found = re.search(r"^totals: (\d+)", file.read(), re.MULTILINE)
    if found is None:
        raise RuntimeError(f"{out_file} holds no totals line: did the process exit?")
    return int(found.group(1))
