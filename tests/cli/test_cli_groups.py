"""`adiskq groups` lists named consumer groups; `adiskq offsets` moves one."""

from __future__ import annotations

import fcntl
import json
import os
import re
from collections.abc import Iterator

import pytest
from support.cli import fill, invoke

import adiskq
from adiskq._storage.offsets import load_offsets, save_offsets

T0 = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z
SECOND = 1_000_000_000


@pytest.fixture
def stream(stream_path: str) -> str:
    """Two partitions (keys aaa -> 0, bbb -> 1) of 10 messages each, one a second apart."""
    fill(
        stream_path,
        [adiskq.Record(b"%d" % i, key=("aaa", "bbb")[i % 2], timestamp=T0 + i * SECOND) for i in range(20)],
        partitions=2,
    )
    return stream_path


@pytest.fixture
def held_lease(stream: str) -> Iterator[str]:
    """A member of group 'billing' holding a partition's lease: an flock on a file under its folder."""
    folder = os.path.join(stream, "groups", "billing")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "partition-0.lease")
    with open(path, "w") as file:
        file.write(json.dumps({"pid": 4242, "host": "worker-1"}))
        file.flush()
        fcntl.flock(file.fileno(), fcntl.LOCK_EX)
        yield path


def rows(output: str) -> list[list[str]]:
    """The cells of the table's rows: the lines after its rule, while they have columns."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("─")) + 1
    table = []
    for line in lines[start:]:
        if not re.search(r"\S\s{2,}\S", line):
            break
        table.append(re.split(r"\s{2,}", line.strip()))
    return table


def test_groups_lists_committed_offsets_and_lag_per_partition(stream: str) -> None:
    """Each group and partition: committed offset, next offset, lag; '-' where nothing was committed."""
    save_offsets(stream, "billing", {0: 4})
    result = invoke("groups", stream)
    assert result.exit_code == 0
    assert rows(result.stdout) == [["billing", "0", "4", "10", "6", "-"], ["1", "-", "10", "-", "-"]]


def test_groups_says_when_there_are_none(stream: str) -> None:
    """A stream without named groups says so."""
    assert "no named consumer groups" in invoke("groups", stream).stdout


def test_groups_json_is_for_machines(stream: str) -> None:
    """`--json`: committed offsets, lag and members per group."""
    save_offsets(stream, "billing", {0: 4, 1: 10})
    document = json.loads(invoke("groups", stream, "--json").stdout)
    assert document == {
        "billing": {
            "committed": {"0": 4, "1": 10},
            "lag": {"0": 6, "1": 0},
            "total_lag": 6,
            "members": [],
            "tags": None,
        }
    }


@pytest.mark.anyio
async def test_groups_show_each_live_member_and_its_partitions(stream: str) -> None:
    """Members of a named group (pid, host) and the partitions each holds, in the table and the JSON."""
    async with adiskq.ConsumerGroup(stream, name="billing") as group:
        assert group.assignment == (0, 1)
        table_output = invoke("groups", stream).stdout
        document = json.loads(invoke("groups", stream, "--json").stdout)
        stats_output = invoke("stats", stream).stdout
    here = f"pid {os.getpid()} on {os.uname().nodename}"
    assert rows(table_output)[0][-1] == here
    assert f"group billing members: {here}: 0,1" in table_output
    (member,) = document["billing"]["members"]
    assert (member["pid"], member["partitions"], member["exclusive"]) == (os.getpid(), [0, 1], False)
    assert f"{here}: 0,1" in stats_output


def test_groups_shows_who_holds_a_group(stream: str, held_lease: str) -> None:
    """A member's lease names it (pid and host) beside the group."""
    assert "group billing is in use by pid 4242 on host 'worker-1'" in invoke("groups", stream).stdout


def test_reset_to_oldest_replays_every_partition(stream: str) -> None:
    """`--reset-to oldest` moves every partition to its oldest offset and shows before and after."""
    save_offsets(stream, "billing", {0: 7, 1: 3})
    result = invoke("offsets", stream, "--group", "billing", "--reset-to", "oldest")
    assert result.exit_code == 0, result.output
    assert load_offsets(stream, "billing") == {0: 0, 1: 0}
    assert rows(result.stdout) == [["0", "7", "0", "10"], ["1", "3", "0", "10"]]


def test_reset_to_newest_skips_the_backlog(stream: str) -> None:
    """`--reset-to newest` moves every partition to its end; a new group is created."""
    result = invoke("offsets", stream, "--group", "fresh", "--reset-to", "newest")
    assert result.exit_code == 0
    assert load_offsets(stream, "fresh") == {0: 10, 1: 10}
    assert rows(result.stdout) == [["0", "-", "10", "0"], ["1", "-", "10", "0"]]


def test_reset_to_an_offset_of_one_partition_keeps_the_others(stream: str) -> None:
    """`--reset-to N --partition P` changes P only."""
    save_offsets(stream, "billing", {0: 7, 1: 3})
    assert invoke("offsets", stream, "-g", "billing", "--reset-to", "5", "-p", "1").exit_code == 0
    assert load_offsets(stream, "billing") == {0: 7, 1: 5}


def test_reset_to_a_time_picks_the_first_message_at_or_after_it(stream: str) -> None:
    """A time moves each partition to its first message at or after that time."""
    invoke("offsets", stream, "-g", "billing", "--reset-to", "2026-01-01T00:00:05Z")
    # partition 0 holds messages 0, 2, 4, ... (offsets 0, 1, 2, ...); partition 1 holds 1, 3, 5, ...
    assert load_offsets(stream, "billing") == {0: 3, 1: 2}


def test_an_offset_outside_a_partition_is_refused_and_nothing_stored(stream: str) -> None:
    """An offset a partition does not hold is refused with the range it does hold."""
    save_offsets(stream, "billing", {0: 1})
    result = invoke("offsets", stream, "-g", "billing", "--reset-to", "11")
    assert result.exit_code == 1
    assert "partition 0 holds offsets 0..9 (next 10), so it cannot be reset to 11" in result.stderr
    assert load_offsets(stream, "billing") == {0: 1}


def test_dry_run_stores_nothing(stream: str) -> None:
    """`--dry-run` shows the new offsets and leaves the group as it was."""
    save_offsets(stream, "billing", {0: 7})
    result = invoke("offsets", stream, "-g", "billing", "--reset-to", "oldest", "--dry-run")
    assert "dry run: nothing stored" in result.stdout
    assert load_offsets(stream, "billing") == {0: 7}


def test_a_group_in_use_is_refused(stream: str, held_lease: str) -> None:
    """While a member holds the group, its offsets are not moved: it would overwrite them."""
    save_offsets(stream, "billing", {0: 7})
    result = invoke("offsets", stream, "-g", "billing", "--reset-to", "oldest")
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "Error: group 'billing' is in use (pid 4242 on host 'worker-1'): its members would overwrite the new "
        "offsets. Stop the group's consumers, then run this again"
    )
    assert load_offsets(stream, "billing") == {0: 7}


def test_a_lease_nobody_holds_does_not_block_a_reset(stream: str) -> None:
    """A lease file left by a member that is gone (no flock on it) does not count as in use."""
    folder = os.path.join(stream, "groups", "billing")
    os.makedirs(folder)
    with open(os.path.join(folder, "partition-0.lease"), "w") as file:
        file.write(json.dumps({"pid": 4242, "host": "worker-1"}))
    assert invoke("offsets", stream, "-g", "billing", "--reset-to", "oldest").exit_code == 0
    assert load_offsets(stream, "billing") == {0: 0, 1: 0}


def test_a_corrupt_offsets_file_is_replaced_by_a_reset(stream: str) -> None:
    """A reset is the way out of an unreadable offsets file; it warns that it replaces it."""
    save_offsets(stream, "billing", {0: 1})
    with open(os.path.join(stream, "groups", "billing", "offsets.json"), "w") as file:
        file.write("garbage")
    result = invoke("offsets", stream, "-g", "billing", "--reset-to", "newest")
    assert result.exit_code == 0
    assert "the reset replaces that file" in result.stderr
    assert load_offsets(stream, "billing") == {0: 10, 1: 10}


def test_a_group_name_no_folder_can_hold_is_misuse(stream: str) -> None:
    """An empty name, or one whose encoded folder name would pass 255 bytes, is a usage error."""
    assert invoke("offsets", stream, "-g", "", "--reset-to", "oldest").exit_code == 2
    assert invoke("offsets", stream, "-g", ":" * 90, "--reset-to", "oldest").exit_code == 2


def test_a_group_name_with_a_separator_stays_inside_groups(stream: str) -> None:
    """A Kafka group id such as ``../x`` is moved in its encoded folder inside ``groups/``, never outside."""
    before = sorted(os.listdir(os.path.dirname(stream)))
    assert invoke("offsets", stream, "-g", "../x", "--reset-to", "oldest").exit_code == 0
    assert sorted(os.listdir(os.path.dirname(stream))) == before
    assert os.path.isdir(os.path.join(stream, "groups", "%..%2Fx"))
    assert load_offsets(stream, "../x") == {0: 0, 1: 0}


def test_reset_needs_a_group_and_a_position(stream: str) -> None:
    """Both --group and --reset-to are required."""
    assert invoke("offsets", stream, "--reset-to", "oldest").exit_code == 2
    assert invoke("offsets", stream, "-g", "billing").exit_code == 2


def test_replacing_unreadable_offsets_creates_the_group_folder_like_a_member_would(stream_path: str) -> None:
    """set_offsets(replace=True) makes the group's folder as a member's commit does (the stream's mode)."""
    from adiskq._storage.group_admin import set_offsets
    from adiskq._storage.offsets import group_dir, update_offsets

    fill(stream_path, [b"x"])
    path = os.path.realpath(stream_path)
    previous = os.umask(0o002)  # a team's shared stream: group members may write
    try:
        assert set_offsets(path, "replaced", {0: 1}, replace=True, mode=0o664) == {0: 1}
        update_offsets(path, "committed", {0: 1}, mode=0o664)
    finally:
        os.umask(previous)
    assert os.stat(group_dir(path, "replaced")).st_mode == os.stat(group_dir(path, "committed")).st_mode
    assert load_offsets(path, "replaced") == {0: 1}


def test_a_member_joining_during_a_reset_cannot_take_a_partition_until_it_is_stored(
    stream: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reset holds the partitions' leases from its check until the offsets are stored, so a member
    that joins in between takes them only afterwards, and then starts from the new offsets."""
    save_offsets(stream, "billing", {0: 7, 1: 3})
    from adiskq._storage import group_admin
    from adiskq._storage.leases import Membership

    real_update = group_admin.update_offsets
    member = Membership(stream, "billing")
    took: list[bool] = []

    def a_member_joins_first(*args: object, **kwargs: object) -> dict[int, int]:
        member.join()
        took.append(member.try_acquire(0))
        return real_update(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(group_admin, "update_offsets", a_member_joins_first)
    try:
        result = invoke("offsets", stream, "-g", "billing", "--reset-to", "oldest")
        assert result.exit_code == 0, result.output
        assert took == [False]  # the lease was the reset's until the offsets were stored
        assert member.try_acquire(0)
        assert load_offsets(stream, "billing") == {0: 0, 1: 0}  # what the member starts from now
    finally:
        member.leave()
