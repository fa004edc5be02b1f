"""How the members of a named group share its partitions: each member's fair share, what it gives back,
what it tries to take. Numbers in, numbers out: no files, no clock.

Every member computes its share from the same view — the live members, ordered by when they joined
(then by id) — so the shares add up to the partition count without the members talking to each
other: with ``N`` partitions and ``M`` members, the ``N % M`` oldest members get ``N // M + 1``
partitions and the others ``N // M``. Older members get the extra ones so that a member joining
takes partitions from as few others as possible. While any live member asked to be exclusive, the
oldest of those gets every partition and everyone else none.

A member above its share gives back its highest-numbered partitions; a member below it tries the
free ones starting from its own place in the order, so members joining together do not all reach
for the same partitions first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence

__all__ = ["MemberView", "candidates", "fair_share", "give_back"]


@dataclasses.dataclass(frozen=True, slots=True, order=True)
class MemberView:
    """What a member's share depends on; members sort by when they joined, then by id."""

    joined_ns: int
    id: str
    exclusive: bool = dataclasses.field(default=False, compare=False)


def _rank(members: Sequence[MemberView], me: str) -> tuple[list[MemberView], int]:
    ordered = sorted(members)
    for index, member in enumerate(ordered):
        if member.id == me:
            return ordered, index
    raise ValueError(f"member {me!r} is not among the members it shares with")


def fair_share(members: Sequence[MemberView], me: str, partition_count: int) -> int:
    """How many partitions member ``me`` should hold (``me`` must be among ``members``)."""
    ordered, rank = _rank(members, me)
    for member in ordered:
        if member.exclusive:
            return partition_count if member.id == me else 0
    base, extra = divmod(partition_count, len(ordered))
    return base + (1 if rank < extra else 0)


def give_back(held: Collection[int], share: int) -> list[int]:
    """The partitions to release when holding more than ``share``: the highest-numbered ones."""
    return sorted(held)[max(share, 0) :]


def candidates(members: Sequence[MemberView], me: str, partition_count: int, held: Collection[int]) -> list[int]:
    """Partitions not held by ``me``, in the order to try them: from ``me``'s place in the order on."""
    ordered, rank = _rank(members, me)
    if partition_count == 0:
        return []
    first = rank * partition_count // len(ordered)
    order = [(first + step) % partition_count for step in range(partition_count)]
    mine = set(held)
    return [partition for partition in order if partition not in mine]
