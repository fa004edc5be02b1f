"""Creating a stream all or nothing in a folder of streams (a Kafka gateway's ROOT): the stream is
built in a scratch folder beside it, then renamed into place.

A stream created in place becomes visible as its files appear: a creation that fails halfway (out
of descriptors, of disk, killed) would leave a folder that looks like a stream with fewer partitions
than asked, or none. So the stream is built in ``ROOT/+creating-<random>`` (``+`` is not allowed in
a Kafka topic name, so no topic, listing or client ever sees it), closed (the stream's own creation
fsyncs every file and folder), renamed to its name, and ROOT is fsynced. The rename is the one step
that publishes the stream: before it there is none, after it the whole one. A scratch folder left
by a crash is removed when the gateway starts (``remove_leftovers``); ``adiskq check ROOT`` names
any it finds and ``--repair`` removes them.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
from typing import Final

from .files import fsync_dir
from .stream import StreamWriter

__all__ = ["SCRATCH_PREFIX", "build_stream", "is_scratch", "leftovers", "remove_leftovers"]

SCRATCH_PREFIX: Final = "+creating-"

logger: Final = logging.getLogger("adiskq.producer")


def is_scratch(name: str) -> bool:
    """True for the name of a scratch folder a topic is built in."""
    return name.startswith(SCRATCH_PREFIX)


def build_stream(root: str, name: str, partitions: int, **settings: object) -> None:
    """Create the stream ``ROOT/name`` with ``partitions`` partitions (and these stream
    ``settings``: ``segment_size_bytes``, ``retention``, ``max_message_bytes``), whole or not at
    all; FileExistsError if something is at that name already. Blocking: run it in a thread."""
    final = os.path.join(root, name)
    scratch = os.path.join(root, SCRATCH_PREFIX + secrets.token_hex(8))
    try:
        # Each partition parked as soon as it is made: one partition's files open at a time.
        StreamWriter.open(scratch, partitions=partitions, park_partitions=True, **settings).close()  # type: ignore[arg-type]
        if os.path.lexists(final):
            raise FileExistsError(f"{name!r} already exists")
        # rename(2) would replace an empty folder at the name: the check above narrows that to a
        # folder made in between by hand, and an empty folder held no stream.
        os.rename(scratch, final)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    fsync_dir(root)


def leftovers(root: str) -> list[str]:
    """The scratch folders of creations that did not finish, by name."""
    try:
        with os.scandir(root) as entries:
            return sorted(e.name for e in entries if is_scratch(e.name) and e.is_dir(follow_symlinks=False))
    except (FileNotFoundError, NotADirectoryError):
        return []


def remove_leftovers(root: str) -> list[str]:
    """Remove the scratch folders of creations that did not finish; their names."""
    removed = leftovers(root)
    for name in removed:
        shutil.rmtree(os.path.join(root, name), ignore_errors=True)
        logger.warning("adiskq: removed %s, a topic creation that did not finish", name)
    if removed:
        fsync_dir(root)
    return removed
