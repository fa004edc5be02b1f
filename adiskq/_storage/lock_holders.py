"""Who holds a ``flock`` now, in words, for the error of a wait that ran out: read from the kernel's
own table, ``/proc/locks``, so no holder has to write its name anywhere while it holds the lock.

``/proc/locks`` lists every lock with the inode it is on and the pid of the process that took it
(``1: FLOCK  ADVISORY  WRITE 4242 08:01:131 0 EOF``; waiters are listed with ``->``). The state in
``/proc/PID/stat`` then says whether that process is stopped (``T``: SIGSTOP, Ctrl-Z; ``t``: a
debugger) — the usual reason a holder that is alive does not let go. The host is the one a producer
wrote in ``writers/`` under that pid, else this one (a ``flock`` is local to the machine).
"""

from __future__ import annotations

import os
import socket

from .writers import live_writers

__all__ = ["describe_flock_holder"]

_STATES = {"T": "stopped", "t": "stopped by a debugger", "D": "waiting for the disk", "Z": "exiting"}


def _holder_pids(inode: int, device: int) -> list[int]:
    """Pids holding a lock (not waiting for one) on the file with this inode and device."""
    wanted = f"{os.major(device):02x}:{os.minor(device):02x}:{inode}"
    pids = []
    try:
        with open("/proc/locks") as table:
            for line in table:
                fields = line.split()
                if len(fields) < 6 or fields[1] == "->":
                    continue
                if fields[5] == wanted and fields[4].isdigit():
                    pids.append(int(fields[4]))
    except OSError:
        return []
    return pids


def _state(pid: int) -> str | None:
    """What ``/proc/PID/stat`` says the process is doing, in words (None: running or sleeping)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            text = stat.read()
    except OSError:
        return None
    after_name = text.rpartition(")")[2].split()
    return _STATES.get(after_name[0]) if after_name else None


def describe_flock_holder(lock_path: str, stream_path: str) -> str | None:
    """``pid 4242 on host "box" (stopped)`` for the process holding a ``flock`` on ``lock_path``,
    or None when the kernel does not say (another pid namespace, or no longer held)."""
    try:
        info = os.stat(lock_path)
    except OSError:
        return None
    pids = list(dict.fromkeys(_holder_pids(info.st_ino, info.st_dev)))
    if not pids:
        return None
    hosts = {writer.pid: writer.host for writer in live_writers(stream_path)}
    described = []
    for pid in pids:
        state = "this process" if pid == os.getpid() else _state(pid)
        host = hosts.get(pid, socket.gethostname())
        described.append(f"pid {pid} on host {host!r}" + (f" ({state})" if state else ""))
    return ", ".join(described)
