"""``adiskq upgrade PATH``: move a stream to the current format, as a step its owner takes.

A stream of an older format (``adiskq/1`` before tags, ``adiskq/2`` to ``adiskq/4`` before Kafka's
headers: ``settings.py``) is read and written as it is; only this moves it to ``adiskq/5``, keeping
its compression and identity. The move itself is one atomic write of ``settings.json`` (the records
do not change: every record of an older format is the same bytes in format 5), but a program that
knows only an older format and has the stream open checked the format when it opened it: after the
move it would misread the first tagged record, or the first null header value, as damage. So the
move is refused while anything this process can see has the stream open:

- a producer (``writers/``, and the owner lock this takes exclusively for the whole move, so no
  producer opens meanwhile: ``StreamLockedError`` names the one that holds it);
- a member of a consumer group (``groups/NAME/members/``, ``leases.py``).

A plain ``Consumer`` leaves no trace in the stream: the command's documentation says to stop those
first.

``give_identity`` moves a stream of formats 1 to 3 to format 4, and gives a format-5 stream its id
(``settings.py``: a ``stream_id``, which the Kafka mirror needs), under the same rules, for the same
reason: a reader of an older adiskq that has the stream open would go on with it, and its producer
could rewrite ``settings.json`` without the id.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import NamedTuple

from .._sansio.values import GroupMember
from .leases import read_members
from .offsets import list_groups
from .settings import FORMAT, IDENTITY_FORMAT, save_settings
from .stream import StreamReader, StreamWriter

__all__ = ["Upgrade", "give_identity", "upgrade_stream"]


class Upgrade(NamedTuple):
    """What ``upgrade_stream`` found and did."""

    before: str  # the format the stream had
    after: str  # the format it has now (``before`` when nothing was moved)
    readers: tuple[tuple[str, GroupMember], ...]  # (group, member) that had it open: nothing moved
    identity_given: bool = False  # give_identity gave the stream its id now (a format-5 stream keeps its format)


def open_group_members(stream_path: str) -> list[tuple[str, GroupMember]]:
    """Every live member of every consumer group of the stream, as (group name, member)."""
    return [(name, member) for name in list_groups(stream_path) for member in read_members(stream_path, name)]


def upgrade_stream(path: str, *, lock_timeout: float = 0.0) -> Upgrade:
    """Move the stream at ``path`` to the current format, unless a producer or a group member has it
    open (see the module's docstring). Raises ``StreamNotFoundError`` where there is no stream (none
    is created) and ``StreamLockedError`` while a producer holds it."""
    StreamReader.open(path)  # a missing stream is an error here, not one to create
    writer = StreamWriter.open(path, lock_timeout=lock_timeout)
    try:
        settings = writer.settings
        if settings.format == FORMAT:
            return Upgrade(settings.format, settings.format, ())
        readers = tuple(open_group_members(writer.path))
        if readers:
            return Upgrade(settings.format, settings.format, readers)
        moved = dataclasses.replace(settings, format=FORMAT)
        save_settings(writer.path, moved, mode=writer.mode)
        writer.settings = moved
        return Upgrade(settings.format, moved.format, ())
    finally:
        writer.close()


def give_identity(path: str, *, lock_timeout: float = 0.0) -> tuple[str | None, Upgrade]:
    """Give the stream at ``path`` its identity (format 4), unless it has one, or a producer or a
    group member has it open. Returns the stream's id (None when nothing was moved because of open
    members: ``Upgrade.readers`` names them) and what was done. Raises as ``upgrade_stream``."""
    StreamReader.open(path)
    writer = StreamWriter.open(path, lock_timeout=lock_timeout)
    try:
        settings = writer.settings
        if settings.stream_id is not None:
            return settings.stream_id, Upgrade(settings.format, settings.format, ())
        readers = tuple(open_group_members(writer.path))
        if readers:
            return None, Upgrade(settings.format, settings.format, readers)
        identity_format = FORMAT if settings.format == FORMAT else IDENTITY_FORMAT
        moved = dataclasses.replace(settings, format=identity_format, stream_id=uuid.uuid4().hex)
        save_settings(writer.path, moved, mode=writer.mode)
        writer.settings = moved
        return moved.stream_id, Upgrade(settings.format, moved.format, (), identity_given=True)
    finally:
        writer.close()
