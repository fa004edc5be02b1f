"""Takes locks of a stream's ``locks/`` as a shared producer would, says so, and holds them until told.

    python -m tests.support.lock_holder PATH NAME [NAME...]

NAME is ``setup``, ``vacuum``, ``turn``, ``partition-N`` or ``offsets-GROUP`` (a group's
``offsets.lock``). Prints ``held`` once every lock is taken; a line on stdin makes it let go of them,
print ``released`` and exit. The parent stops it (SIGSTOP) while it holds them.
"""

from __future__ import annotations

import fcntl
import os
import sys

from adiskq._sansio.naming import LOCKS_DIR, partition_lock_name
from adiskq._storage.offsets import LOCK_FILE, group_dir


def take(path: str, name: str) -> int:
    """Take one lock with a plain blocking ``flock`` (not the code under test); its descriptor."""
    if name.startswith("offsets-"):
        lock_path = os.path.join(group_dir(path, name.removeprefix("offsets-")), LOCK_FILE)
    elif name.startswith("partition-"):
        lock_path = os.path.join(path, LOCKS_DIR, partition_lock_name(int(name.removeprefix("partition-"))))
    else:
        lock_path = os.path.join(path, LOCKS_DIR, name)
    os.makedirs(os.path.dirname(lock_path), exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def main(path: str, names: list[str]) -> None:
    held = [take(path, name) for name in names]
    print("held", flush=True)
    sys.stdin.readline()
    for fd in held:
        os.close(fd)
    print("released", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
