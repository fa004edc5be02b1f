"""Fair shares of a group's partitions (sans-IO): every member computes the same split from the same view.

Local groups only: this is the local group's own split; Kafka's coordinator assigns a Kafka group's
partitions (README's capability table).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adiskq._sansio.assignment import MemberView, candidates, fair_share, give_back


def members(count: int, *, exclusive: frozenset[int] = frozenset()) -> list[MemberView]:
    """``count`` members joined in order m0, m1, ...; those in ``exclusive`` asked to be alone."""
    return [MemberView(1000 + i, f"m{i}", i in exclusive) for i in range(count)]


@pytest.mark.parametrize(
    ("count", "partitions", "shares"),
    [
        (1, 6, [6]),
        (2, 6, [3, 3]),
        (3, 6, [2, 2, 2]),
        (4, 6, [2, 2, 1, 1]),
        (4, 3, [1, 1, 1, 0]),
        (3, 0, [0, 0, 0]),
        (5, 12, [3, 3, 2, 2, 2]),
    ],
)
def test_shares_split_the_partitions_oldest_first(count: int, partitions: int, shares: list[int]) -> None:
    """N partitions over M members: the N % M oldest hold one more than the others."""
    view = members(count)
    assert [fair_share(view, f"m{i}", partitions) for i in range(count)] == shares


def test_the_view_order_does_not_matter() -> None:
    """Members listed in any order get the shares their join times give them."""
    view = members(4)
    assert [fair_share(list(reversed(view)), f"m{i}", 6) for i in range(4)] == [2, 2, 1, 1]


def test_equal_join_times_are_ordered_by_id() -> None:
    """Members that joined in the same nanosecond are ranked by id, the same way by everyone."""
    view = [MemberView(5, "b"), MemberView(5, "a")]
    assert (fair_share(view, "a", 3), fair_share(view, "b", 3)) == (2, 1)


def test_the_oldest_exclusive_member_gets_everything() -> None:
    """With exclusive members alive, the oldest of them holds every partition, everyone else none."""
    view = members(4, exclusive=frozenset({1, 3}))
    assert [fair_share(view, f"m{i}", 6) for i in range(4)] == [0, 6, 0, 0]


def test_a_member_not_in_the_view_is_refused() -> None:
    """Asking the share of a member the view lacks is a ValueError (the caller always counts itself)."""
    with pytest.raises(ValueError, match="not among"):
        fair_share(members(2), "stranger", 4)


@given(st.integers(1, 20), st.integers(0, 100))
def test_shares_always_add_up_and_differ_by_one_at_most(count: int, partitions: int) -> None:
    """For any number of members and partitions, shares sum to the partition count, within one of each other."""
    view = members(count)
    shares = [fair_share(view, f"m{i}", partitions) for i in range(count)]
    assert sum(shares) == partitions
    assert max(shares) - min(shares) <= 1


@pytest.mark.parametrize(
    ("held", "share", "returned"),
    [({0, 1, 2}, 3, []), ({0, 1, 2}, 2, [2]), ({5, 0, 3}, 1, [3, 5]), ({4}, 0, [4]), (set(), 0, [])],
)
def test_a_member_gives_back_its_highest_partitions(held: set[int], share: int, returned: list[int]) -> None:
    """A member above its share gives back the highest-numbered partitions it holds."""
    assert give_back(held, share) == returned


def test_candidates_start_at_the_members_place_and_skip_what_it_holds() -> None:
    """A member tries partitions from its place in the order on, wrapping around, without those it holds."""
    view = members(3)
    assert candidates(view, "m0", 6, set()) == [0, 1, 2, 3, 4, 5]
    assert candidates(view, "m1", 6, set()) == [2, 3, 4, 5, 0, 1]
    assert candidates(view, "m2", 6, {4}) == [5, 0, 1, 2, 3]
    assert candidates(view, "m1", 0, set()) == []
