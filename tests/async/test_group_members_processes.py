"""Members of one group in separate processes: they share six partitions, survive a SIGKILL, admit a newcomer.

One scenario per backend (the workers run on it), run once and checked by the tests below:

1. three workers start; each gets two partitions; they process the first messages;
2. more messages come; one worker is killed (SIGKILL) while it processes them; the two others take
   its partitions (three each) and process everything;
3. a fourth worker starts and takes a share (two each again); more messages are processed;
4. the three live workers get SIGTERM and close cleanly.

Each worker commits and flushes after every batch and reports what it processed and stored
(tests/support/group_worker.py).

Local stream only: the shares and their timing are a local group's (its leases and looks);
members of a Kafka group sharing a topic are held in tests/kafka_backend/test_api_both_backends.py
and test_group_members.py (README's capability table: named ConsumerGroup).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import time
from collections import Counter

import pytest
from support.consumer import Writer
from support.group_workers import Worker, balanced, wait_until

import adiskq
from adiskq._storage.offsets import load_offsets

PARTITIONS = 6
NAME = "billing"
REBALANCE_INTERVAL = 0.2


@dataclasses.dataclass
class Outcome:
    """What one run of the scenario saw."""

    first: dict[str, tuple[int, ...]]  # worker -> partitions, after the three balanced
    victim: str
    victim_held: tuple[int, ...]
    victim_stored: dict[int, int]  # partition -> next offset the victim reported stored
    after_kill: dict[str, tuple[int, ...]]
    seconds_to_rebalance: float
    after_join: dict[str, tuple[int, ...]]
    pushed: set[tuple[int, int]]
    processed: Counter[tuple[int, int]]
    processed_by_victim: set[tuple[int, int]]
    members: tuple[adiskq.GroupMember, ...]  # stats, with the three live workers
    pids: dict[str, int]
    exit_codes: list[int]
    members_after_stop: tuple[adiskq.GroupMember, ...]
    stored_after_stop: dict[int, int]
    next_offsets: dict[int, int]


def run_scenario(backend: str, folder: pathlib.Path) -> Outcome:
    path = os.fspath(folder / "stream")
    writer = Writer(path, partitions=PARTITIONS, notify=False)
    pushed: set[tuple[int, int]] = set()

    def push(count: int) -> None:
        for partition in range(PARTITIONS):
            first = writer.append([b"m"] * count, partition=partition)
            pushed.update((partition, first + i) for i in range(count))

    workers: list[Worker] = []

    def start(label: str) -> Worker:
        worker = Worker(path, NAME, os.fspath(folder), label, backend=backend, rebalance_interval=REBALANCE_INTERVAL)
        workers.append(worker)
        return worker

    def all_processed(group: list[Worker]) -> bool:
        return pushed <= {item for w in group for item in w.processed()}

    try:
        push(10)
        one, two, three = start("one"), start("two"), start("three")
        live = [one, two, three]
        wait_until(lambda: balanced(live, PARTITIONS, [2, 2, 2]), "two partitions per worker", live)
        first = {w.label: w.assignment() or () for w in live}
        wait_until(lambda: all_processed(live), "the first messages processed", live)

        push(100)
        victim = two
        wait_until(lambda: any(o >= 10 for _, o in victim.processed()), "the victim at work on new messages", live)
        victim_held = victim.assignment() or ()
        killed_at = time.monotonic()
        victim.kill()
        live = [one, three]
        wait_until(lambda: balanced(live, PARTITIONS, [3, 3]), "the victim's partitions taken over", live)
        rebalanced_at = max(w.assignment_time() for w in live)
        after_kill = {w.label: w.assignment() or () for w in live}
        wait_until(lambda: all_processed(workers), "every message processed after the kill", live)

        four = start("four")
        live = [one, three, four]
        wait_until(lambda: balanced(live, PARTITIONS, [2, 2, 2]), "the fourth worker's share", live)
        after_join = {w.label: w.assignment() or () for w in live}
        push(10)
        wait_until(lambda: all_processed(workers), "every message processed after the join", live)
        members = adiskq.stats(path).members[NAME]

        exit_codes = [w.stop() for w in live]
        processed: Counter[tuple[int, int]] = Counter(item for w in workers for item in w.processed())
        stats = adiskq.stats(path)
        return Outcome(
            first=first,
            victim=victim.label,
            victim_held=victim_held,
            victim_stored=victim.stored(),
            after_kill=after_kill,
            seconds_to_rebalance=rebalanced_at - killed_at,
            after_join=after_join,
            pushed=pushed,
            processed=processed,
            processed_by_victim=set(victim.processed()),
            members=members,
            pids={w.label: w.pid for w in live},
            exit_codes=exit_codes,
            members_after_stop=stats.members[NAME],
            stored_after_stop=load_offsets(os.path.realpath(path), NAME),
            next_offsets={p: writer.next_offset(p) for p in range(PARTITIONS)},
        )
    finally:
        for worker in workers:
            worker.ensure_dead()
        writer.close()


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def outcome(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    """The scenario, run once per backend of the workers."""
    backend = str(request.param)
    result = run_scenario(backend, tmp_path_factory.mktemp(f"group-{backend}"))
    print(f"\n{backend}: partitions taken over {result.seconds_to_rebalance:.3f} s after the kill")
    return result


def test_three_workers_get_two_partitions_each(outcome: Outcome) -> None:
    """Three members of one group over six partitions hold two each, no partition twice."""
    held = sorted(p for partitions in outcome.first.values() for p in partitions)
    assert held == list(range(PARTITIONS))
    assert sorted(len(partitions) for partitions in outcome.first.values()) == [2, 2, 2]


def test_a_killed_workers_partitions_go_to_the_survivors(outcome: Outcome) -> None:
    """After a SIGKILL, the two survivors hold three partitions each, the victim's among them."""
    held = sorted(p for partitions in outcome.after_kill.values() for p in partitions)
    assert held == list(range(PARTITIONS))
    assert set(outcome.victim_held) <= set(held)
    assert outcome.victim not in outcome.after_kill
    assert outcome.seconds_to_rebalance > 0


def test_every_message_is_processed(outcome: Outcome) -> None:
    """Every message pushed, before and after the kill and the join, is processed at least once."""
    assert outcome.pushed <= set(outcome.processed)
    assert set(outcome.processed) <= outcome.pushed


def test_only_what_the_victim_left_uncommitted_is_processed_twice(outcome: Outcome) -> None:
    """A message comes twice only if the killed worker processed it after its last stored commit."""
    twice = {item for item, count in outcome.processed.items() if count > 1}
    for partition, offset in twice:
        assert (partition, offset) in outcome.processed_by_victim
        assert offset >= outcome.victim_stored.get(partition, 0)


def test_a_fourth_worker_takes_a_share(outcome: Outcome) -> None:
    """A worker joining two that hold three partitions each ends with two, as do they."""
    assert sorted(len(partitions) for partitions in outcome.after_join.values()) == [2, 2, 2]
    assert len(outcome.after_join["four"]) == 2


def test_stats_show_each_member_with_its_pid_and_partitions(outcome: Outcome) -> None:
    """adiskq.stats lists the live members: pid, host and the partitions each holds."""
    by_pid = {member.pid: member for member in outcome.members}
    assert set(by_pid) == set(outcome.pids.values())
    for label, pid in outcome.pids.items():
        assert by_pid[pid].partitions == outcome.after_join[label]
        assert by_pid[pid].host
        assert not by_pid[pid].exclusive


def test_stopped_workers_leave_and_store_everything(outcome: Outcome) -> None:
    """Workers closed by SIGTERM exit cleanly, leave the group, and their commits cover every message."""
    assert outcome.exit_codes == [0, 0, 0]
    assert outcome.members_after_stop == ()
    assert outcome.stored_after_stop == outcome.next_offsets
