"""ConsumerGroup: partitions merged and discovered, commits stored and resumed from.

The tests taking ``where`` run on a local stream and on a Kafka topic (README's capability table:
named groups and their commits map); the others look at a local stream's files or features."""

from __future__ import annotations

import collections.abc
import os
import pathlib
import shutil
import signal
import sys
import tempfile
from typing import TYPE_CHECKING

import anyio
import pytest
from support.backends import delete_oldest, fill, fill_for_retention, key_for, write_to
from support.consumer import Writer
from support.paths import TESTS_DIR
from support.unprivileged import nobody_command
from support.waiting import until_changed

import adiskq
from adiskq._storage.offsets import load_offsets

if TYPE_CHECKING:
    from support.backends import Where

pytestmark = pytest.mark.anyio


async def take(group: adiskq.ConsumerGroup, count: int) -> list[adiskq.Message]:
    """The next ``count`` messages (failing after 10 s)."""
    messages: list[adiskq.Message] = []
    with anyio.fail_after(10):
        async for message in group:
            messages.append(message)
            if len(messages) == count:
                break
    return messages


def group_folder(stream_path: str, name: str = "g") -> str:
    """Where the group keeps its offsets."""
    return os.path.join(os.path.realpath(stream_path), "groups", name)


def stored_offsets(stream_path: str, name: str) -> dict[int, int]:
    """The group's offsets as stored on disk."""
    return load_offsets(os.path.realpath(stream_path), name)


async def test_a_group_reads_every_partition_in_order_within_each(where: Where) -> None:
    """A group yields every message of every partition, each partition's in offset order."""
    stream_path = where.new()
    async with adiskq.Producer(stream_path, partitions=3, partitioner="fnv1") as producer:
        keys = [key_for(p, 3) for p in range(3)]
        for i in range(30):
            await producer.push(b"%d" % i, key=keys[i % 3])
    async with adiskq.ConsumerGroup(stream_path, "g", end="close") as group:
        with anyio.fail_after(10):
            messages = [m async for m in group]
        assert group.assignment == (0, 1, 2)
    assert len(messages) == 30
    for partition in range(3):
        assert [m.offset for m in messages if m.partition == partition] == list(range(10))


async def test_no_partition_starves_another(stream_path: str) -> None:
    """Batches come from the partitions in turn, so a long partition does not hold back the others."""
    with Writer(stream_path, partitions=2) as writer:
        writer.append([b"a"] * 5000, partition=0)
        writer.append([b"b"] * 10, partition=1)
    async with adiskq.ConsumerGroup(stream_path, end="close") as group:
        with anyio.fail_after(10):
            batches = group.batches(max_messages=100)
            first = await batches.__anext__()
            second = await batches.__anext__()
    assert {first[0].partition, second[0].partition} == {0, 1}


async def test_a_group_follows_new_messages(where: Where) -> None:
    """With end="wait", a group waits for and yields messages pushed later to any partition."""
    stream_path = where.new()
    async with (
        adiskq.Producer(stream_path, partitions=2, partitioner="fnv1") as producer,
        adiskq.ConsumerGroup(stream_path, "g") as group,
    ):
        await producer.push(b"late", key=key_for(1, 2))
        (message,) = await take(group, 1)
    assert (message.partition, message.value) == (1, b"late")


async def test_partitions_added_later_are_discovered(stream_path: str) -> None:
    """A partition a producer adds after the group opened is read too, from its first message."""
    async with adiskq.Producer(stream_path, partitions=1) as producer:
        await producer.push(b"old")
    async with adiskq.ConsumerGroup(stream_path, start="newest", poll_interval=60) as group:
        assert group.assignment == (0,)
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                got: list[adiskq.Message] = []

                async def read() -> None:
                    got.extend(await take(group, 1))

                tg.start_soon(read)
                await anyio.wait_all_tasks_blocked()
                async with adiskq.Producer(stream_path, partitions=3) as producer:
                    await producer.push(b"new", key=key_for(2, 3))
        assert group.assignment == (0, 1, 2)
    assert [(m.partition, m.offset, m.value) for m in got] == [(2, 0, b"new")]


async def test_end_close_stops_after_what_was_there(where: Where) -> None:
    """end="close" ends the group's iteration at what every partition held when it opened."""
    stream_path = where.new()
    await fill(stream_path, {p: [b"p%d" % p] * 4 for p in range(3)}, partitions=3)
    async with adiskq.ConsumerGroup(stream_path, "g", end="close") as group:
        await fill(stream_path, {p: [b"p%d" % p] * 2 for p in range(3)}, partitions=3)
        with anyio.fail_after(10):
            messages = [m async for m in group]
    assert len(messages) == 12


async def test_a_failed_open_fails_again_rather_than_reading_nothing(stream_path: str) -> None:
    """A group whose open failed (a start past the end) says so on every open, and a read after it
    says the group is not open: it never ends quietly."""
    with Writer(stream_path) as writer:
        writer.append([b"only"])
    group = adiskq.ConsumerGroup(stream_path, start=5, end="close")
    try:
        for _ in range(2):
            with pytest.raises(adiskq.OffsetOutOfRangeError):
                await group.__aenter__()
            with pytest.raises(adiskq.ClosedError, match="not open"):
                await group.__anext__()
    finally:
        await group.aclose()


# -- commits ---------------------------------------------------------------------------------------


async def test_a_named_group_resumes_after_its_last_commit(where: Where) -> None:
    """After a restart, a named group continues after the last message it committed in each partition."""
    stream_path = where.new()
    for partition in range(2):
        await write_to(stream_path, [b"p%d-%d" % (partition, i) for i in range(10)], partition, partitions=2)
    async with adiskq.ConsumerGroup(stream_path, name="billing") as group:
        for message in await take(group, 20):
            if message.offset < 6:
                group.commit(message)
    async with adiskq.ConsumerGroup(stream_path, name="billing", end="close") as group:
        with anyio.fail_after(10):
            rest = sorted([(m.partition, m.offset) async for m in group])
    assert rest == [(p, o) for p in range(2) for o in range(6, 10)]


async def test_a_group_that_consumed_everything_resumes_and_waits(where: Where) -> None:
    """A group that committed its last message resumes at the end, then gets only what comes next."""
    stream_path = where.new()
    await write_to(stream_path, [b"a", b"b", b"c"])
    async with adiskq.ConsumerGroup(stream_path, name="all") as group:
        for message in await take(group, 3):
            group.commit(message)
    async with adiskq.ConsumerGroup(stream_path, name="all") as group:
        await write_to(stream_path, [b"d"])
        (message,) = await take(group, 1)
    assert (message.offset, message.value) == (3, b"d")


async def test_committed_offsets_win_over_start(where: Where) -> None:
    """Where a group has committed offsets, they decide where it starts, not start=."""
    stream_path = where.new()
    await write_to(stream_path, [b"%d" % i for i in range(10)])
    async with adiskq.ConsumerGroup(stream_path, name="g") as group:
        messages = await take(group, 4)
        group.commit(messages[-1])
    async with adiskq.ConsumerGroup(stream_path, name="g", start="newest", end="close") as group:
        with anyio.fail_after(10):
            assert [m.offset async for m in group] == [4, 5, 6, 7, 8, 9]


async def test_commits_are_stored_on_an_interval_while_waiting(stream_path: str) -> None:
    """A commit reaches groups/NAME/offsets.json within the interval, even while the group waits."""
    with Writer(stream_path) as writer:
        writer.append([b"x", b"y"])
    async with adiskq.ConsumerGroup(stream_path, name="g", commit_interval=0.05) as group:
        messages = await take(group, 2)
        group.commit(messages[1])
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(group.__anext__)  # waits for messages that never come
                await until_changed(lambda: stored_offsets(stream_path, "g") == {0: 2}, [group_folder(stream_path)])
                tg.cancel_scope.cancel()


async def test_flush_stores_commits_at_once(stream_path: str) -> None:
    """flush() stores pending commits before it returns."""
    with Writer(stream_path) as writer:
        writer.append([b"x"])
    async with adiskq.ConsumerGroup(stream_path, name="g", commit_interval=3600) as group:
        (message,) = await take(group, 1)
        group.commit(message)
        assert stored_offsets(stream_path, "g") == {0: 0}  # where it started, stored as it opened
        await group.flush()
        assert stored_offsets(stream_path, "g") == {0: 1}
        assert group.committed == {0: 1}


async def test_close_stores_commits_even_when_cancelled(where: Where) -> None:
    """Closing a group in a cancelled scope still stores its pending commits."""
    stream_path = where.new()
    await write_to(stream_path, [b"x"])
    group = adiskq.ConsumerGroup(stream_path, name="g", commit_interval=3600)
    await group.__aenter__()
    (message,) = await take(group, 1)
    group.commit(message)
    with anyio.CancelScope() as scope:
        scope.cancel()
        await group.aclose()
    assert adiskq.lag(stream_path, "g") == {0: 0}  # committed past its one message


async def test_a_commit_never_goes_backwards(where: Where) -> None:
    """Committing an older message after a newer one keeps the newer progress."""
    stream_path = where.new()
    await write_to(stream_path, [b"a", b"b", b"c"])
    async with adiskq.ConsumerGroup(stream_path, name="g") as group:
        messages = await take(group, 3)
        group.commit(messages[2])
        group.commit(messages[0])
        assert group.committed == {0: 3}


async def test_commit_needs_a_name(stream_path: str) -> None:
    """commit() on an unnamed group raises ValueError saying to name it."""
    with Writer(stream_path) as writer:
        writer.append([b"x"])
    async with adiskq.ConsumerGroup(stream_path) as group:
        (message,) = await take(group, 1)
        with pytest.raises(ValueError, match="named group"):
            group.commit(message)


@pytest.mark.parametrize("name", ["", "..", "a/b", "../escape", ".hidden", "x" * 300])
def test_bad_group_names_are_refused(where: Where, name: str) -> None:
    """A group name that is empty, hidden or leaves groups/ raises InvalidNameError at construction."""
    with pytest.raises(adiskq.InvalidNameError):
        adiskq.ConsumerGroup(where.new(), name=name)


async def test_a_closed_group_raises_closed_error(where: Where) -> None:
    """Reading or committing through a closed group raises ClosedError; closing again is harmless."""
    stream_path = where.new()
    await write_to(stream_path, [b"x"])
    group = adiskq.ConsumerGroup(stream_path, name="g")
    async with group:
        (message,) = await take(group, 1)
    await group.aclose()
    with pytest.raises(adiskq.ClosedError):
        await group.__anext__()
    with pytest.raises(adiskq.ClosedError):
        group.commit(message)


COMMIT_FOREVER = """
import sys, anyio, adiskq
async def main():
    async with adiskq.ConsumerGroup(sys.argv[1], name="crash", commit_interval=0.001) as group:
        async for message in group:
            group.commit(message)
            if message.offset == 500:
                print("going", flush=True)
anyio.run(main)
"""


async def test_a_killed_group_leaves_its_old_or_new_commit_never_a_torn_one(stream_path: str) -> None:
    """SIGKILL while a group stores commits every millisecond leaves a readable offset no later than read."""
    with Writer(stream_path) as writer:
        for start in range(0, 20_000, 100):
            writer.append([b"%d" % i for i in range(start, start + 100)])
    async with await anyio.open_process([sys.executable, "-c", COMMIT_FOREVER, stream_path]) as process:
        assert process.stdout is not None
        with anyio.fail_after(30):
            line = await process.stdout.receive()
            assert line.startswith(b"going")
            process.send_signal(signal.SIGKILL)
            await process.wait()
    stored = stored_offsets(stream_path, "crash")
    assert set(stored) <= {0}
    assert 0 <= stored.get(0, 0) <= 20_000
    async with adiskq.ConsumerGroup(stream_path, name="crash", end="close") as group:
        with anyio.fail_after(10):
            rest = [m.offset async for m in group]
    assert rest == list(range(stored.get(0, 0), 20_000))


NOBODY_READS = """
import sys, anyio, adiskq
async def main():
    async with adiskq.Consumer(sys.argv[1], end="close") as consumer:
        print(len([m async for m in consumer]))
    async with adiskq.ConsumerGroup(sys.argv[1], name="ro", end="close") as group:
        async for message in group:
            group.commit(message)
    print(adiskq.stats(sys.argv[1]).groups["ro"][0])
anyio.run(main)
"""


@pytest.fixture
def public_folder() -> collections.abc.Iterator[pathlib.Path]:
    """A folder anyone may enter (pytest's own temporary root is private to its owner)."""
    folder = pathlib.Path(tempfile.mkdtemp(prefix="adiskq-public-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder)


async def test_readers_need_only_read_permission(public_folder: pathlib.Path) -> None:
    """A user who may only read the stream consumes it; a named group needs write access to groups/ only."""
    path = os.fspath(public_folder / "stream")
    with Writer(path) as writer:
        writer.append([b"a", b"b"])
    groups = public_folder / "stream" / "groups"
    groups.mkdir()
    os.chown(groups, 65534, 65534)  # the nobody user owns groups/, and nothing else
    command, environment = nobody_command(path, code=NOBODY_READS)
    with anyio.fail_after(60):
        result = await anyio.run_process(command, cwd=TESTS_DIR, env=environment, check=False)
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().split() == ["2", "2"]


async def commit_then_lose_it(where: Where) -> tuple[str, int]:
    """A one-partition stream or topic of 60 messages whose group "g" committed the first, and
    whose oldest messages (that commit's position among them) retention then deleted: the place
    and the oldest offset kept."""
    place = where.new()
    await fill_for_retention(place, 60)
    async with adiskq.ConsumerGroup(place, "g") as group:
        (first,) = await take(group, 1)
        group.commit(first)
    return place, await delete_oldest(place, 60)


async def test_a_group_whose_commit_retention_passed_goes_on_from_the_oldest_and_reports_it(where: Where) -> None:
    """A named group whose committed offset retention deleted reads on from the oldest kept
    (on_data_loss="skip", the default) and reports (partition, first, last_exclusive)."""
    place, oldest = await commit_then_lose_it(where)
    async with adiskq.ConsumerGroup(place, "g", end="close") as group:
        with anyio.fail_after(10):
            messages = [m async for m in group]
        assert group.skipped == [(0, 1, oldest)]
    assert [m.offset for m in messages] == list(range(oldest, 60))


async def test_a_group_raises_at_a_commit_retention_passed_when_asked(where: Where) -> None:
    """With on_data_loss="raise", a named group whose committed offset retention deleted raises
    OffsetOutOfRangeError naming the range, and again at the next read."""
    place, oldest = await commit_then_lose_it(where)
    async with adiskq.ConsumerGroup(place, "g", on_data_loss="raise") as group:
        for _ in range(2):
            with (
                anyio.fail_after(10),
                pytest.raises(adiskq.OffsetOutOfRangeError, match="deleted by retention") as caught,
            ):
                await group.__anext__()
            assert (caught.value.partition, caught.value.offset, caught.value.oldest_offset) == (0, 1, oldest)


async def test_a_group_reports_what_retention_deleted_before_it_read(stream_path: str) -> None:
    """A group skipping vacuumed offsets reports (partition, first, last_exclusive) for each gap."""
    with Writer(stream_path, partitions=2, segment_size_bytes=1024) as writer:
        for i in range(60):
            writer.append([b"x" * 80 + b"%06d" % i], partition=1)
        writer.append([b"kept"], partition=0)
        writer.stream.vacuum(adiskq.Retention(max_bytes=2048))
    oldest = adiskq.stats(stream_path).partitions[1].oldest_offset
    assert oldest > 0
    async with adiskq.ConsumerGroup(stream_path, start=0, end="close") as group:
        with anyio.fail_after(10):
            messages = [m async for m in group]
        assert group.skipped == [(1, 0, oldest)]
    assert sorted((m.partition, m.offset) for m in messages) == [(0, 0)] + [(1, o) for o in range(oldest, 60)]
