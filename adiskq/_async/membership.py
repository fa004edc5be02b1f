"""A member of a named group in the event loop: when it looks at the other members, and what it then does.

A member looks every ``rebalance_interval`` seconds while its group is read, and at once when another
member rings (joins, gives partitions back, or leaves): members of other processes hear a ring as an
inotify event on ``groups/NAME/members/``, members of this process are woken directly (also where
there is no inotify).
A member that dies cannot ring: the others watch the processes of the members on their host
(exits.py, pidfds) and look when one exits; the interval bounds how long its partitions wait for a
new holder where that watch is not available. Looking costs a directory listing and one ``flock``
probe per member (some microseconds), so it runs on the event loop thread.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time

from .._sansio.assignment import MemberView, candidates, fair_share, give_back
from .._sansio.values import GroupMember
from .._storage.leases import RING_SUFFIX, Membership
from . import wakeup
from .exits import get_exit_watch
from .notify import Notifier, Watch

__all__ = ["GroupMembership", "Plan"]


class _Doorbell(wakeup.Waiter):
    """Subscribed to the members folder: notes that someone rang, and wakes the group's waiter."""

    __slots__ = ("_target", "rang")

    def __init__(self, target: wakeup.Waiter) -> None:
        super().__init__()
        self.fired = False  # never armed nor disarmed: every event comes through
        self.rang = False
        self._target = target

    def wake(self) -> None:
        self.rang = True
        self._target.wake()


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    """What one look decided: partitions to give back, and partitions to try, in order."""

    give_back: list[int]
    try_order: list[int]
    wanted: int  # how many of ``try_order`` to take


class GroupMembership:
    """One member of a named group: its files (``Membership``), its doorbell, and its looks."""

    def __init__(
        self,
        stream_path: str,
        name: str,
        *,
        exclusive: bool,
        rebalance_interval: float,
        notifier: Notifier,
        waiter: wakeup.Waiter,
    ) -> None:
        self.files = Membership(stream_path, name, exclusive=exclusive)
        self._key = ("group", os.path.realpath(stream_path), name)  # in wakeup's registry
        self.rebalance_interval = rebalance_interval
        self._notifier = notifier
        self._doorbell = _Doorbell(waiter)
        self._watch: Watch | None = None
        self._next_look = 0.0  # monotonic

    @property
    def id(self) -> str:
        """This member's id (as ``stats`` shows it)."""
        return self.files.id

    def join(self) -> None:
        """Become a member (files, then the doorbell's watch); the first look is due at once."""
        self.files.join()
        self._watch = self._notifier.watch(self.files.members_dir, self._doorbell, folder_suffix=RING_SUFFIX)
        wakeup.register(self._key, self._doorbell)
        self._ring_local()
        self._next_look = 0.0

    def _ring_local(self) -> None:
        """Wake the members of this process directly (no kernel, no files)."""
        wakeup.notify_others(self._key, self._doorbell)

    def look_soon(self) -> None:
        """Make the next look due now (the partition count changed)."""
        self._doorbell.rang = True

    def due_in(self) -> float:
        """Seconds until the next look is due (zero or less: now)."""
        if self._doorbell.rang:
            return 0.0
        return self._next_look - time.monotonic()

    def members(self) -> list[GroupMember]:
        """The live members, oldest first (dead members' files are deleted on the way)."""
        return self.files.members()

    def plan(self, partition_count: int) -> Plan:
        """Look at the members and decide what to give back or try to take."""
        self._doorbell.rang = False
        self._next_look = time.monotonic() + self.rebalance_interval
        members = self.files.members()
        # Members in other processes of this host cannot ring when they die: watch their exits.
        host, pid = socket.gethostname(), os.getpid()
        get_exit_watch().watch_only({m.pid for m in members if m.host == host and m.pid != pid}, self._doorbell)
        views = [MemberView(m.joined_ns, m.id, m.exclusive) for m in members]
        me = self.files.id
        held = self.files.held
        share = fair_share(views, me, partition_count)
        returned = give_back(held, share)
        if returned or len(held) >= share:
            return Plan(returned, [], 0)
        return Plan([], candidates(views, me, partition_count, held), share - len(held))

    def acquire(self, plan: Plan) -> list[int]:
        """Take the free partitions the plan tries, up to what it wants; the ones taken."""
        taken: list[int] = []
        for partition in plan.try_order:
            if len(taken) == plan.wanted:
                break
            if self.files.try_acquire(partition):
                taken.append(partition)
        return taken

    def release(self, partition: int) -> None:
        """Give a partition's lease back (its commits stored first, by the caller)."""
        self.files.release(partition)

    def ring(self) -> None:
        """Wake the other members to look again."""
        self.files.ring()
        self._ring_local()

    def leave(self) -> None:
        """Give back every lease, leave the group, drop the watch; harmless twice."""
        watch, self._watch = self._watch, None
        if watch is not None:
            self._notifier.unwatch(watch, self._doorbell)
        get_exit_watch().unwatch(self._doorbell)
        wakeup.unregister(self._key, self._doorbell)
        if self.files.joined:
            self.files.leave()
            self._ring_local()
