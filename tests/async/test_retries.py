"""ConsumerGroup retries and dead letters: delays kept, attempts counted, dead letters labelled, nothing lost.

The tests taking ``where`` run on a local stream and on a Kafka topic (README's capability table:
dead_letter() maps, to the topic TOPIC.NAME.dead-letters). The others stay on a local stream:
retry() and max_attempts= are refused on Kafka (it has no retry stream), and that refusal is tested
in tests/kafka_backend/test_differences.py."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import sys
import textwrap
import time
from typing import TYPE_CHECKING

import anyio
import pytest

import adiskq
from adiskq._sansio.naming import partition_for_key
from adiskq._storage.retries import pending_retries

if TYPE_CHECKING:
    from support.backends import Where

pytestmark = pytest.mark.anyio

NAME = "billing"


async def push(path: str, values: list[bytes], *, partitions: int = 1, key: str = "k") -> None:
    async with adiskq.Producer(path, partitions=partitions) as producer:
        for value in values:
            await producer.push(value, key=key, headers={"type": b"order"}, tag="created")


async def take(group: adiskq.ConsumerGroup, count: int) -> list[tuple[adiskq.Message, int]]:
    """The next ``count`` messages (failing after 10 s), each with the wall-clock time (ns) it was handed out at."""
    taken: list[tuple[adiskq.Message, int]] = []
    with anyio.fail_after(10):
        async for message in group:
            taken.append((message, time.time_ns()))
            if len(taken) == count:
                break
    return taken


async def assert_all_done(path: str) -> None:
    """The group has no retry pending, and nothing left to deliver."""
    assert pending_retries(path, NAME) == []
    async with adiskq.ConsumerGroup(path, NAME, end="close") as group:
        with anyio.fail_after(10):
            assert [m async for m in group] == []


def dead_letters(path: str) -> list[adiskq.Message]:
    """Every message of a dead-letter stream (one partition)."""
    stats = adiskq.stats(path)
    return [adiskq.read(path, 0, offset) for offset in range(stats.partitions[0].next_offset)]


async def test_a_retried_message_comes_back_after_its_delay_and_not_before(stream_path: str) -> None:
    """retry(delay=d) delivers the message again no sooner than d seconds after the call, and the
    messages behind it are delivered meanwhile."""
    await push(stream_path, [b"first", b"second", b"third"])
    delay = 0.4
    async with adiskq.ConsumerGroup(stream_path, NAME) as group:
        [(first, _)] = await take(group, 1)
        asked_ns = time.time_ns()
        await group.retry(first, delay=delay, reason="payment service down")
        rest = await take(group, 3)
    values = [message.value for message, _ in rest]
    assert values == [b"second", b"third", b"first"]
    again, delivered_ns = rest[2]
    assert delivered_ns - asked_ns >= delay * 1e9
    assert rest[1][1] - asked_ns < delay * 1e9  # the messages behind it did not wait for it
    assert (again.partition, again.offset, again.key, again.tag) == (0, 0, b"k", "created")
    assert again.headers["type"] == b"order"
    assert again.headers["adiskq-reason"] == b"payment service down"
    assert again.timestamp_ns == first.timestamp_ns


async def test_due_retries_and_new_messages_take_turns(stream_path: str) -> None:
    """Retries that are due do not hold back new messages, nor new messages the retries: batches alternate."""
    await push(stream_path, [b"a", b"b", b"c", b"d"])
    async with adiskq.ConsumerGroup(stream_path, NAME) as group:
        batches = group.batches(max_messages=1)
        with anyio.fail_after(10):
            first = [(await anext(batches))[0] for _ in range(2)]
            for message in first:
                await group.retry(message)  # due at once
            order = [(batch[0].value, batch[0].attempt) for batch in [await anext(batches) for _ in range(4)]]
    assert order == [(b"a", 2), (b"c", 1), (b"b", 2), (b"d", 1)]


async def test_attempt_counts_the_deliveries(stream_path: str) -> None:
    """message.attempt is 1 the first time and one more at each delivery after a retry."""
    await push(stream_path, [b"m"])
    attempts = []
    async with adiskq.ConsumerGroup(stream_path, NAME) as group:
        for _ in range(4):
            [(message, _)] = await take(group, 1)
            attempts.append(message.attempt)
            await group.retry(message)
    assert attempts == [1, 2, 3, 4]


async def test_the_last_attempt_goes_to_the_dead_letter_stream_with_its_origin(
    stream_path: str, tmp_path: pathlib.Path
) -> None:
    """At max_attempts, retry() sends the message to the dead-letter stream, whose headers name the
    source stream, partition, offset, group, attempts and reason; it is not delivered again."""
    dead = str(tmp_path / "dead")
    source = stream_path.encode()  # the fixture gives an absolute path
    await push(stream_path, [b"keep", b"poison"])
    async with adiskq.ConsumerGroup(stream_path, NAME, max_attempts=3, dead_letter_path=dead) as group:
        [(keep, _), (poison, _)] = await take(group, 2)
        group.commit(keep)
        await group.retry(poison, reason="timeout")
        for attempt in (2, 3):
            [(message, _)] = await take(group, 1)
            assert (message.value, message.attempt) == (b"poison", attempt)
            await group.retry(message, reason="timeout")
        with anyio.move_on_after(0.3):  # nothing more comes: the message left the group
            extra = await take(group, 1)
            raise AssertionError(f"delivered again: {extra}")
    [letter] = dead_letters(dead)
    assert letter.value == b"poison"
    assert letter.key == b"k"
    assert letter.tag == "created"
    assert letter.headers["type"] == b"order"
    assert letter.headers["adiskq-source-stream"] == source
    assert letter.headers["adiskq-source-partition"] == b"0"
    assert letter.headers["adiskq-source-offset"] == b"1"
    assert letter.headers["adiskq-group"] == NAME.encode()
    assert letter.headers["adiskq-attempt"] == b"3"
    assert letter.headers["adiskq-reason"] == b"timeout; delivered 3 times (max_attempts=3)"


async def test_dead_letter_sends_the_message_there_at_once(where: Where) -> None:
    """dead_letter(msg, reason=...) stores it in the group's default dead-letter stream and counts it processed."""
    stream_path = where.new()
    await push(stream_path, [b"bad", b"good"])
    async with adiskq.ConsumerGroup(stream_path, NAME) as group:
        [(bad, _)] = await take(group, 1)
        await group.dead_letter(bad, reason="cannot parse")
        [(good, _)] = await take(group, 1)
        group.commit(good)
    async with adiskq.Consumer(where.dead_letters(stream_path, NAME), end="close") as letters:
        with anyio.fail_after(10):
            [letter] = [m async for m in letters]
    assert (letter.value, letter.headers["adiskq-reason"], letter.headers["adiskq-attempt"]) == (
        b"bad",
        b"cannot parse",
        b"1",
    )
    async with adiskq.ConsumerGroup(stream_path, NAME, end="close") as group:
        with anyio.fail_after(10):
            assert [m async for m in group] == []


async def test_a_retry_waits_through_a_restart_and_is_done_once_committed(stream_path: str) -> None:
    """A retry pending when the group closes is delivered by the next member; once committed, never again."""
    await push(stream_path, [b"a", b"b"])
    async with adiskq.ConsumerGroup(stream_path, NAME) as group:
        [(a, _), (b, _)] = await take(group, 2)
        await group.retry(a, delay=0.2)
        group.commit(b)
    assert len(pending_retries(stream_path, NAME)) == 1
    async with adiskq.ConsumerGroup(stream_path, NAME) as group:
        [(again, _)] = await take(group, 1)
        assert (again.value, again.attempt) == (b"a", 2)
        group.commit(again)
    await assert_all_done(stream_path)


async def test_retries_follow_partitions_added_later(stream_path: str) -> None:
    """A partition added while the group runs gets its retries too: the retry stream grows with the stream."""
    await push(stream_path, [b"old"])
    async with adiskq.ConsumerGroup(stream_path, NAME) as group:
        [(old, _)] = await take(group, 1)
        await group.retry(old, delay=0)
        [(again, _)] = await take(group, 1)
        group.commit(again)
        async with adiskq.Producer(stream_path, partitions=2) as producer:
            for i in range(100):  # a key the new partition holds
                receipt = await producer.push(b"new", key=f"k{i}")
                if receipt.partition == 1:
                    break
        new = next(message for message, _ in await take(group, i + 1) if message.partition == 1)
        await group.retry(new, delay=0)
        [(back, _)] = await take(group, 1)
    assert (back.partition, back.value, back.attempt) == (1, b"new", 2)


async def test_retries_finished_out_of_order_are_all_done_once_the_oldest_is(stream_path: str) -> None:
    """A retry that falls due first and is committed is stored as finished (not pending), and both
    are done once the older one is."""
    await push(stream_path, [b"slow", b"fast"])
    async with adiskq.ConsumerGroup(stream_path, NAME) as group:
        [(slow, _), (fast, _)] = await take(group, 2)
        await group.retry(slow, delay=0.5)
        await group.retry(fast, delay=0)
        [(first, _)] = await take(group, 1)
        assert first.value == b"fast"
        group.commit(first)
        await group.flush()
        assert [retry.message.value for retry in pending_retries(stream_path, NAME)] == [b"slow"]
        [(second, _)] = await take(group, 1)
        assert second.value == b"slow"
        group.commit(second)
    await assert_all_done(stream_path)


async def test_retry_refuses_what_it_cannot_do(stream_path: str) -> None:
    """Retries need a named group, a delay of 0 or more, and a max_attempts of 1 or more."""
    await push(stream_path, [b"m"])
    with pytest.raises(adiskq.InvalidArgumentError, match="max_attempts"):
        adiskq.ConsumerGroup(stream_path, NAME, max_attempts=0)
    with pytest.raises(adiskq.InvalidArgumentError, match="named group"):
        adiskq.ConsumerGroup(stream_path, max_attempts=3)
    async with adiskq.ConsumerGroup(stream_path) as unnamed:
        [(message, _)] = await take(unnamed, 1)
        with pytest.raises(adiskq.InvalidArgumentError, match="named group"):
            await unnamed.retry(message)
    async with adiskq.ConsumerGroup(stream_path, NAME) as group:
        [(message, _)] = await take(group, 1)
        with pytest.raises(adiskq.InvalidArgumentError, match="delay"):
            await group.retry(message, delay=-1)


async def test_members_share_the_retries_of_the_partitions_they_hold(stream_path: str) -> None:
    """A retry stored by a member that leaves is delivered by the member that takes its partition."""
    await push(stream_path, [b"m"], partitions=2, key="x")
    first = adiskq.ConsumerGroup(stream_path, NAME, rebalance_interval=0.05)
    async with first:
        [(message, _)] = await take(first, 1)
        await first.retry(message, delay=0.2)
        second = adiskq.ConsumerGroup(stream_path, NAME, rebalance_interval=0.05)
        await second.__aenter__()
    try:
        [(again, _)] = await take(second, 1)
        assert (again.value, again.attempt, again.partition) == (b"m", 2, message.partition)
    finally:
        await second.aclose()


async def test_finished_retries_are_deleted_from_disk(stream_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Segments of the retry stream whose retries are all committed are deleted once the commits are stored."""
    monkeypatch.setattr("adiskq._storage.retries.RETRY_SEGMENT_BYTES", 1024)  # a few retries a segment
    count = 60
    await push(stream_path, [b"%d" % i for i in range(count)])
    async with adiskq.ConsumerGroup(stream_path, NAME) as group:
        for message, _ in await take(group, count):
            await group.retry(message)
        for message, _ in await take(group, count):
            assert message.attempt == 2
            group.commit(message)
        await group.flush()
    folder = os.path.join(stream_path, "groups", NAME, "retries", "parts", "000000")
    indexes = [name for name in os.listdir(folder) if name.endswith(".index")]
    assert len(indexes) == 1  # only the active segment is left
    assert pending_retries(stream_path, NAME) == []


async def test_live_members_each_deliver_the_retries_of_their_partitions(stream_path: str) -> None:
    """Two members holding one partition each: each gets back the retries of its own partition."""
    async with adiskq.Producer(stream_path, partitions=2):
        pass
    keys = {}
    for i in range(100):  # a key for each partition
        keys.setdefault(partition_for_key(f"k{i}".encode(), 2), f"k{i}")
    again: dict[str, list[adiskq.Message]] = {"one": [], "two": []}
    done = anyio.Event()

    async def work(label: str, group: adiskq.ConsumerGroup) -> None:
        async for message in group:
            if message.attempt == 1:
                await group.retry(message, delay=0.05)
                continue
            assert message.partition in group.assignment
            again[label].append(message)
            group.commit(message)
            if len(again["one"]) + len(again["two"]) == 6:
                done.set()

    one = adiskq.ConsumerGroup(stream_path, NAME, rebalance_interval=0.05)
    two = adiskq.ConsumerGroup(stream_path, NAME, rebalance_interval=0.05)
    async with one, two, anyio.create_task_group() as tasks:
        tasks.start_soon(work, "one", one)
        tasks.start_soon(work, "two", two)
        with anyio.fail_after(10):
            async for assignment in one.assignments():
                if len(assignment) == 1:
                    break
            async for assignment in two.assignments():
                if len(assignment) == 1:
                    break
            await push(stream_path, [b"x", b"y", b"z"], partitions=2, key=keys[0])
            await push(stream_path, [b"x", b"y", b"z"], partitions=2, key=keys[1])
            await done.wait()
        tasks.cancel_scope.cancel()
    for label in ("one", "two"):
        assert len(again[label]) == 3
        assert len({m.partition for m in again[label]}) == 1
        assert sorted(m.value for m in again[label]) == [b"x", b"y", b"z"]


CHILD = textwrap.dedent(
    """
    import os, signal, sys
    import anyio
    import adiskq

    async def main(path, count):
        group = adiskq.ConsumerGroup(path, "billing", commit_interval=3600)
        await group.__aenter__()
        seen = set()
        async for message in group:
            await group.retry(message, delay=1.0, reason="flaky")
            print(message.offset, flush=True)
            if message.attempt == 1:
                seen.add(message.offset)
            if len(seen) == count:
                break
        os.kill(os.getpid(), signal.SIGKILL)  # nothing closed, no commit stored

    anyio.run(main, sys.argv[1], int(sys.argv[2]), backend=sys.argv[3])
    """
)


async def test_a_member_killed_after_retry_loses_no_retry(stream_path: str, anyio_backend: str) -> None:
    """A member SIGKILLed right after retry() returned: every retried message comes back, with attempt 2."""
    count = 20
    await push(stream_path, [b"%d" % i for i in range(count)])
    child = await anyio.run_process([sys.executable, "-c", CHILD, stream_path, str(count), anyio_backend], check=False)
    assert child.returncode == -signal.SIGKILL
    retried = {int(line) for line in child.stdout.decode().split()}
    assert retried == set(range(count))
    async with adiskq.ConsumerGroup(stream_path, NAME) as group:
        again: set[int] = set()
        with anyio.fail_after(20):
            async for message in group:
                if message.attempt == 2:
                    again.add(message.offset)
                    assert message.value == b"%d" % message.offset
                group.commit(message)
                if again == retried:
                    break


async def test_a_group_with_deserializers_retries_and_dead_letters_the_stored_bytes(stream_path: str) -> None:
    """With a value_deserializer, a retry comes back decoded as the first delivery did, and the dead
    letter holds the bytes the stream stored, not the decoded object."""
    await push(stream_path, [b'{"id": 1}'])
    dead = stream_path + "-dead"
    async with adiskq.ConsumerGroup(
        stream_path, NAME, max_attempts=2, dead_letter_path=dead, value_deserializer=json.loads
    ) as group:
        [(first, _)] = await take(group, 1)
        assert first.value == {"id": 1}
        await group.retry(first, delay=0)
        [(again, _)] = await take(group, 1)
        assert (again.value, again.attempt) == ({"id": 1}, 2)
        await group.retry(again, delay=0, reason="still failing")  # the last attempt: a dead letter
    [letter] = dead_letters(dead)
    assert letter.value == b'{"id": 1}'
    assert letter.headers["adiskq-attempt"] == b"2"


async def test_a_clean_hand_over_delivers_no_finished_retry_again(stream_path: str) -> None:
    """A retry finished while an older one still waits is not delivered again by the next member
    after a clean close (a rolling restart): only the older one is."""
    await push(stream_path, [b"slow", b"fast"])
    async with adiskq.ConsumerGroup(stream_path, NAME) as group:
        [(slow, _), (fast, _)] = await take(group, 2)
        await group.retry(slow, delay=0.5)
        await group.retry(fast, delay=0)
        [(again, _)] = await take(group, 1)
        assert (again.value, again.attempt) == (b"fast", 2)
        group.commit(again)
    async with adiskq.ConsumerGroup(stream_path, NAME) as group:
        [(next_one, _)] = await take(group, 1)
        assert (next_one.value, next_one.attempt) == (b"slow", 2)
        group.commit(next_one)
    await assert_all_done(stream_path)


async def test_retry_or_dead_letter_after_commit_is_refused(stream_path: str) -> None:
    """retry() or dead_letter() of a message already committed raises, naming the commit, and the
    message is not delivered again."""
    await push(stream_path, [b"a", b"b"])
    async with adiskq.ConsumerGroup(stream_path, NAME) as group:
        [(a, _), (b, _)] = await take(group, 2)
        group.commit(b)  # commits a too
        with pytest.raises(adiskq.InvalidArgumentError, match="committed already"):
            await group.retry(a)
        with pytest.raises(adiskq.InvalidArgumentError, match="committed already"):
            await group.dead_letter(b, reason="late")
        with anyio.move_on_after(0.3):
            extra = await take(group, 1)
            raise AssertionError(f"delivered again: {extra}")
    assert pending_retries(stream_path, NAME) == []


async def test_retry_of_a_finished_retry_is_refused(stream_path: str) -> None:
    """A retry delivered and committed cannot be retried after its commit either."""
    await push(stream_path, [b"m"])
    async with adiskq.ConsumerGroup(stream_path, NAME) as group:
        [(first, _)] = await take(group, 1)
        await group.retry(first)
        with pytest.raises(adiskq.InvalidArgumentError, match="committed already"):
            await group.retry(first)  # the retry already counted it processed
        [(again, _)] = await take(group, 1)
        group.commit(again)
        with pytest.raises(adiskq.InvalidArgumentError, match="committed already"):
            await group.retry(again)
    await assert_all_done(stream_path)


async def test_an_undecodable_message_is_dead_lettered_and_passed_in_one_call(stream_path: str) -> None:
    """dead_letter(error) of the DeserializationError the group raised stores the message's bytes as
    a dead letter, commits it, and the group reads on after it."""
    await push(stream_path, [b'{"id": 1}', b"not json", b'{"id": 3}'])
    dead = stream_path + "-dead"
    delivered = []
    async with adiskq.ConsumerGroup(stream_path, NAME, dead_letter_path=dead, value_deserializer=json.loads) as group:
        with anyio.fail_after(10):
            while len(delivered) < 2:
                try:
                    async for message in group:
                        delivered.append(message.value)
                        group.commit(message)
                        if len(delivered) == 2:
                            break
                except adiskq.DeserializationError as error:
                    await group.dead_letter(error, reason=f"cannot decode: {error.__cause__}")
    assert delivered == [{"id": 1}, {"id": 3}]
    [letter] = dead_letters(dead)
    assert letter.value == b"not json"
    assert letter.headers["adiskq-source-offset"] == b"1"
    assert letter.headers["adiskq-reason"].startswith(b"cannot decode: ")
    async with adiskq.ConsumerGroup(stream_path, NAME, end="close", value_deserializer=json.loads) as group:
        with anyio.fail_after(10):
            assert [m async for m in group] == []
