"""Ends a test run's Kafka node if the run itself dies:
``python kafka_watchdog.py OWNER_PID NODE_PID RUN_FOLDER``.

The test run stops its Kafka nodes when it ends; a run killed outright (SIGKILL, a crashed CI job)
cannot, and a JVM left behind would hold its ports and half a gigabyte. This waits, on both
processes' pidfds (no polling), for the first of them to end: the owner first means the node is
killed (SIGKILL) and, once it is gone, the run's folder (its nodes' data and logs) removed; the node
first means there is nothing left to do. Standard library only, so that it starts in milliseconds.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import sys


def main(owner: int, node: int, run_folder: str) -> int:
    """Wait for ``owner`` or ``node`` to end; if ``owner`` went first, kill ``node`` and remove the
    run's folder."""
    try:
        owner_fd, node_fd = os.pidfd_open(owner), os.pidfd_open(node)
    except ProcessLookupError:  # one is gone already: kill the node, which may be the one left
        owner_fd = node_fd = -1
    if owner_fd >= 0:
        ready, _, _ = select.select([owner_fd, node_fd], [], [])
        if node_fd in ready:
            return 0
    with contextlib.suppress(ProcessLookupError):
        os.kill(node, signal.SIGKILL)
    if node_fd >= 0:
        select.select([node_fd], [], [], 30)  # gone, so that nothing writes into the folder any more
    shutil.rmtree(run_folder, ignore_errors=True)  # the other nodes' watchdogs may be removing it too
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]))
