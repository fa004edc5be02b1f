"""Members of a named consumer group and their partition leases, held with ``flock``: the dead hold nothing.

::

    groups/NAME/members/ID.member     one per member, flock'ed (LOCK_EX) by it for as long as it lives;
                                      JSON {"id", "pid", "host", "joined_ns", "exclusive"}, written before
                                      the file is renamed into place and never changed after
    groups/NAME/members/ID.ring       created and deleted at once: a doorbell (an inotify event) telling
                                      the other members to look again: someone joined, gave back or left
    groups/NAME/leases/000003.lease   flock'ed (LOCK_EX) by the member reading partition 3; while held,
                                      JSON {"member", "pid", "host"}; emptied when given back

The kernel drops a ``flock`` when the last descriptor of its open file closes, also when the process
is killed, so a dead member's partitions are free at once, and the next member that looks finds its
member file dead (a shared ``flock`` on it succeeds) and deletes it. A member file is locked before
it gets its name, so a file under that name is never mistaken for a dead one. Lease files are never
deleted (that would race with the next holder). Nothing here is fsynced: it describes live
processes, which a power cut ends anyway. Like every ``flock``, these work on local file systems.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import time
import weakref
from typing import Final

from .._sansio.assignment import MemberView
from .._sansio.naming import partition_dir_name
from .._sansio.values import GroupMember
from .files import DEFAULT_FILE_MODE, dir_mode, flock_held, pread_exact, write_all
from .offsets import ensure_group_dir, group_dir

__all__ = ["LEASES_DIR", "MEMBERS_DIR", "RING_SUFFIX", "Membership", "read_members"]

MEMBERS_DIR: Final = "members"
LEASES_DIR: Final = "leases"
MEMBER_SUFFIX: Final = ".member"
RING_SUFFIX: Final = ".ring"
LEASE_SUFFIX: Final = ".lease"
_ID_LENGTH: Final = 32  # uuid4().hex
_STALE_TEMPORARY_NS: Final = 60 * 10**9  # a joiner renames its file within microseconds
_FLAGS: Final = os.O_NOFOLLOW | os.O_CLOEXEC


def _parse_member(raw: bytes, member_id: str) -> GroupMember | None:
    try:
        info = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(info, dict) or info.get("id") != member_id:
        return None
    pid, host, joined_ns = info.get("pid"), info.get("host"), info.get("joined_ns")
    if not isinstance(pid, int) or not isinstance(host, str) or not isinstance(joined_ns, int):
        return None
    return GroupMember(member_id, pid, host, joined_ns, info.get("exclusive") is True)


def _live_members(members_dir: str, *, delete_dead: bool) -> list[GroupMember]:
    """The live members, oldest first; with ``delete_dead``, dead members' files are deleted."""
    try:
        names = os.listdir(members_dir)
    except FileNotFoundError:
        return []
    live = []
    for name in names:
        path = os.path.join(members_dir, name)
        if name.startswith("."):
            if delete_dead and name.endswith(".tmp"):
                _delete_stale_temporary(path)
            continue
        member_id = name.removesuffix(MEMBER_SUFFIX)
        if len(member_id) != _ID_LENGTH or member_id + MEMBER_SUFFIX != name:
            continue
        try:
            fd = os.open(path, os.O_RDONLY | _FLAGS)
        except OSError:  # gone meanwhile (it left), or not ours to read
            continue
        try:
            if flock_held(fd):
                member = _parse_member(pread_exact(fd, 4096, 0), member_id)
                if member is not None:
                    live.append(member)
            elif delete_dead:
                with contextlib.suppress(OSError):  # another member may delete it first
                    os.unlink(path)
        finally:
            os.close(fd)
    live.sort(key=lambda member: (member.joined_ns, member.id))
    return live


def _delete_stale_temporary(path: str) -> None:
    """Delete a member file that never got its name (its joiner died in between)."""
    with contextlib.suppress(OSError):
        if time.time_ns() - os.stat(path, follow_symlinks=False).st_mtime_ns < _STALE_TEMPORARY_NS:
            return
        fd = os.open(path, os.O_RDONLY | _FLAGS)
        try:
            if not flock_held(fd):
                os.unlink(path)
        finally:
            os.close(fd)


def _lease_holders(leases_dir: str) -> dict[str, list[int]]:
    """Member id -> partitions whose lease names it (the holder may be dead: check its member file)."""
    try:
        names = os.listdir(leases_dir)
    except FileNotFoundError:
        return {}
    holders: dict[str, list[int]] = {}
    for name in names:
        stem = name.removesuffix(LEASE_SUFFIX)
        if stem + LEASE_SUFFIX != name or len(stem) != 6 or not stem.isdigit() or not stem.isascii():
            continue
        try:
            fd = os.open(os.path.join(leases_dir, name), os.O_RDONLY | _FLAGS)
        except OSError:
            continue
        try:
            raw = pread_exact(fd, 4096, 0)
        finally:
            os.close(fd)
        try:
            info = json.loads(raw)
        except ValueError:  # empty: given back; torn: being taken this instant
            continue
        if isinstance(info, dict) and isinstance(info.get("member"), str):
            holders.setdefault(info["member"], []).append(int(stem))
    return holders


def read_members(stream_path: str, name: str) -> list[GroupMember]:
    """The group's live members, oldest first, each with the partitions it holds (reads only)."""
    directory = group_dir(stream_path, name)
    members = _live_members(os.path.join(directory, MEMBERS_DIR), delete_dead=False)
    if not members:
        return []
    holders = _lease_holders(os.path.join(directory, LEASES_DIR))
    return [
        GroupMember(m.id, m.pid, m.host, m.joined_ns, m.exclusive, tuple(sorted(holders.get(m.id, ()))))
        for m in members
    ]


_joined: weakref.WeakSet[Membership] = weakref.WeakSet()


class Membership:
    """One member's files in a named group: its member file and the leases of the partitions it holds.

    ``join()`` makes the member visible to the others; ``leave()`` gives everything back. Giving
    back a lease does not store commits: the caller stores them first (a partition moves only after
    its holder committed or died).
    """

    def __init__(self, stream_path: str, name: str, *, exclusive: bool = False, mode: int = DEFAULT_FILE_MODE) -> None:
        self.stream_path = stream_path
        self.name = name
        self.exclusive = exclusive
        self.mode = mode
        self.id = os.urandom(16).hex()
        self.joined_ns = 0
        directory = group_dir(stream_path, name)
        self.members_dir = os.path.join(directory, MEMBERS_DIR)
        self.leases_dir = os.path.join(directory, LEASES_DIR)
        self._member_path = os.path.join(self.members_dir, self.id + MEMBER_SUFFIX)
        self._member_fd: int | None = None
        self._leases: dict[int, int] = {}  # partition -> descriptor holding its flock

    @property
    def joined(self) -> bool:
        """True between ``join()`` and ``leave()``."""
        return self._member_fd is not None

    @property
    def held(self) -> frozenset[int]:
        """The partitions whose leases this member holds."""
        return frozenset(self._leases)

    @property
    def view(self) -> MemberView:
        """This member as the fair-share computation sees it."""
        return MemberView(self.joined_ns, self.id, self.exclusive)

    def _info(self) -> dict[str, object]:
        return {"id": self.id, "pid": os.getpid(), "host": socket.gethostname()}

    def join(self) -> None:
        """Create and lock this member's file (and the group's folders), then ring the others."""
        if self._member_fd is not None:
            return
        ensure_group_dir(self.stream_path, self.name, durable=True, mode=self.mode)
        folder_mode = dir_mode(self.mode)
        for folder in (self.members_dir, self.leases_dir):
            with contextlib.suppress(FileExistsError):
                os.mkdir(folder, folder_mode)
        self.joined_ns = time.time_ns()
        temporary = os.path.join(self.members_dir, f".{self.id}.tmp")
        fd = os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_EXCL | _FLAGS, self.mode)
        try:
            # Locked before it is named: whoever finds the name finds it locked while we live.
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            info = {**self._info(), "joined_ns": self.joined_ns, "exclusive": self.exclusive}
            write_all(fd, json.dumps(info).encode())
            os.rename(temporary, self._member_path)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        self._member_fd = fd
        _joined.add(self)
        self.ring()

    def members(self) -> list[GroupMember]:
        """The live members, oldest first, this one included; dead members' files are deleted."""
        members = _live_members(self.members_dir, delete_dead=True)
        if self._member_fd is not None and not any(m.id == self.id for m in members):
            # Our file was deleted by hand: we still count ourselves.
            info = GroupMember(self.id, os.getpid(), socket.gethostname(), self.joined_ns, self.exclusive)
            members.append(info)
            members.sort(key=lambda member: (member.joined_ns, member.id))
        return members

    def try_acquire(self, partition: int) -> bool:
        """Take the partition's lease if no live member holds it; True if this member holds it now."""
        if partition in self._leases:
            return True
        path = os.path.join(self.leases_dir, partition_dir_name(partition) + LEASE_SUFFIX)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | _FLAGS, self.mode)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        try:
            os.ftruncate(fd, 0)
            write_all(fd, json.dumps({"member": self.id, **self._info()}).encode())
        except OSError as error:
            if error.errno not in (errno.ENOSPC, errno.EDQUOT):
                os.close(fd)
                raise
            # A full disk must not stop a member from reading; the text is only for stats.
        self._leases[partition] = fd
        return True

    def release(self, partition: int) -> None:
        """Give the partition's lease back (harmless if not held)."""
        fd = self._leases.pop(partition, None)
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)  # drops the flock

    def ring(self) -> None:
        """Tell the other members (through inotify) to look at the group again; best effort."""
        path = os.path.join(self.members_dir, self.id + RING_SUFFIX)
        with contextlib.suppress(OSError):
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | _FLAGS, self.mode))
            os.unlink(path)

    def leave(self) -> None:
        """Give back every lease, delete the member file, and ring; harmless when not joined."""
        for partition in list(self._leases):
            self.release(partition)
        fd, self._member_fd = self._member_fd, None
        if fd is None:
            return
        _joined.discard(self)
        with contextlib.suppress(OSError):
            os.unlink(self._member_path)  # still locked: nobody takes it for a dead member's
        os.close(fd)
        self.ring()

    def _forget_after_fork(self) -> None:
        # The child shares the parent's open files, and with them the flocks: closing its copies
        # (never unlocking, which would unlock the parent's) lets the parent's death free them.
        for fd in self._leases.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._leases.clear()
        if self._member_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._member_fd)
            self._member_fd = None


def _after_fork_in_child() -> None:
    for membership in list(_joined):
        membership._forget_after_fork()
    _joined.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
