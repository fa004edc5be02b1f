"""Creating a topic all or nothing: the stream is built in a scratch folder of ROOT, then renamed
into place.

A stream created in place becomes visible as its files appear: a creation that fails halfway (out
of descriptors, of disk, killed) would leave a folder that looks like a topic with fewer partitions
than asked, or none. So the gateway builds it under ROOT in ``+creating-<random>`` (``+`` is not
allowed in a topic name, so no topic, listing or client ever sees it), closes it (every file and
folder fsynced by the stream's own creation), renames it to the topic's name and fsyncs ROOT. The
rename is the one step that publishes the topic: before it there is no topic, after it the whole
one. A scratch folder left by a crash or a failure is removed when the gateway starts
(``remove_leftovers``), and ``adiskq check`` on a gateway's root names any it finds.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
from typing import Final

from .._storage.files import fsync_dir
from .._storage.stream import StreamWriter

__all__ = ["SCRATCH_PREFIX", "build_topic", "is_scratch", "remove_leftovers"]

SCRATCH_PREFIX: Final = "+creating-"

logger: Final = logging.getLogger("adiskq.kafka")


def is_scratch(name: str) -> bool:
    """True for the name of a scratch folder a topic is built in."""
    return name.startswith(SCRATCH_PREFIX)


def build_topic(root: str, name: str, partitions: int, **settings: object) -> None:
    """Create the stream ``ROOT/name`` with ``partitions`` partitions (and these stream
    ``settings``: ``segment_size_bytes``, ``retention``, ``max_message_bytes``), whole or not at
    all; FileExistsError if something is at that name already. Blocking: run it in a thread."""
    final = os.path.join(root, name)
    scratch = os.path.join(root, SCRATCH_PREFIX + secrets.token_hex(8))
    try:
        StreamWriter.open(scratch, partitions=partitions, **settings).close()  # type: ignore[arg-type]
        if os.path.lexists(final):
            raise FileExistsError(f"topic {name!r} already exists")
        # rename(2) would replace an empty folder at the name: the check above narrows that to a
        # folder made in between by hand, and an empty folder held no topic.
        os.rename(scratch, final)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    fsync_dir(root)


def remove_leftovers(root: str) -> list[str]:
    """Remove the scratch folders of creations that did not finish; their names."""
    try:
        entries = [entry for entry in os.scandir(root) if is_scratch(entry.name)]
    except FileNotFoundError:
        return []
    removed = []
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.name)
            logger.warning("adiskq: removed %s, a topic creation that did not finish", entry.name)
    if removed:
        fsync_dir(root)
    return removed
