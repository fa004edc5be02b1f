"""Wake-ups: one shared inotify instance, the hand-over of its reading, overflow, threads, and the poll.

Local stream only: these wake readers of a stream's files; a Kafka reader is woken by its
client's fetches (README's capability table: Consumer)."""

from __future__ import annotations

import asyncio
import collections.abc
import functools
import os
import sys
import threading

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest
from support.blocked import wait_all_tasks_blocked
from support.consumer import Writer

import adiskq
from adiskq._async import notify, wakeup
from adiskq._sansio.naming import PARTS_DIR, partition_dir_name

pytestmark = pytest.mark.anyio


@pytest.fixture
def polling(monkeypatch: pytest.MonkeyPatch) -> collections.abc.Iterator[None]:
    """Consumers opened in this test poll instead of using inotify."""
    monkeypatch.setenv("ADISKQ_NOTIFY", "poll")
    notify.reset_notifier()
    yield
    monkeypatch.delenv("ADISKQ_NOTIFY")
    notify.reset_notifier()


def inotify_instances() -> int:
    """inotify descriptors this process holds."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:inotify":
                count += 1
        except OSError:
            continue
    return count


async def next_message(consumer: adiskq.Consumer) -> bytes:
    return (await consumer.__anext__()).value


async def test_all_consumers_share_one_inotify_instance(stream_path: str) -> None:
    """Forty consumers of a process use one inotify instance (go-diskq runs out at 128)."""
    with Writer(stream_path, partitions=4, notify=False) as writer:
        writer.append([b"x"])
        consumers = [adiskq.Consumer(stream_path, partition=i % 4) for i in range(40)]
        for consumer in consumers:
            await consumer.__aenter__()
        try:
            assert all(consumer.uses_inotify for consumer in consumers)
            assert inotify_instances() == 1
        finally:
            for consumer in consumers:
                await consumer.aclose()


async def wait_once(consumer: adiskq.Consumer) -> None:
    """Let ``consumer`` wait for a message (which sets up its wake-ups), then stop it waiting."""
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(consumer.__anext__)
            await wait_all_tasks_blocked()
            tg.cancel_scope.cancel()


async def test_watches_are_shared_and_released(stream_path: str) -> None:
    """Consumers of one partition share its folder watch; the last one to close removes it."""
    with Writer(stream_path):
        pass
    folder = os.path.join(os.path.realpath(stream_path), PARTS_DIR, partition_dir_name(0))  # noqa: ASYNC240
    notifier = notify.get_notifier()
    consumers = [adiskq.Consumer(stream_path) for _ in range(5)]
    for consumer in consumers:
        await consumer.__aenter__()
        await wait_once(consumer)
    assert notifier._by_path[folder].refs == 5
    for consumer in consumers:
        await consumer.aclose()
    assert folder not in notifier._by_path


async def test_a_consumer_that_reads_to_its_end_without_waiting_watches_nothing(stream_path: str) -> None:
    """A consumer that reads what is there and closes adds no watch: its wake-ups are set up when it first waits."""
    with Writer(stream_path, partitions=2, notify=False) as writer:
        writer.append([b"a"], partition=0)
        writer.append([b"b"], partition=1)
        notifier = notify.get_notifier()
        async with adiskq.Consumer(stream_path, end="close") as consumer:
            assert sorted([m.value async for m in consumer]) == [b"a", b"b"]
            assert notifier._by_path == {}
        async with adiskq.Consumer(stream_path) as consumer:
            assert sorted([(await consumer.__anext__()).value for _ in range(2)]) == [b"a", b"b"]
            assert notifier._by_path == {}
            await wait_once(consumer)
            # the stream folder (settings.json), and each partition's folder and .index file
            assert len(notifier._by_path) == 5
        assert notifier._by_path == {}


async def test_reading_is_handed_over_when_the_reader_is_woken(stream_path: str) -> None:
    """Two consumers wait on inotify alone; after one is woken, the other is still woken by its commit."""
    with Writer(stream_path, partitions=2, notify=False) as writer:
        async with (
            adiskq.Consumer(stream_path, partition=0, poll_interval=60) as first,
            adiskq.Consumer(stream_path, partition=1, poll_interval=60) as second,
        ):
            got: dict[int, bytes] = {}
            first_read = anyio.Event()

            async def read(partition: int, consumer: adiskq.Consumer) -> None:
                got[partition] = (await consumer.__anext__()).value
                if partition == 0:
                    first_read.set()

            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(read, 0, first)
                    tg.start_soon(read, 1, second)
                    await wait_all_tasks_blocked()
                    writer.append([b"zero"], partition=0)
                    await first_read.wait()
                    await wait_all_tasks_blocked()
                    writer.append([b"one"], partition=1)
    assert got == {0: b"zero", 1: b"one"}


async def test_reading_is_handed_over_when_the_reader_is_cancelled(stream_path: str) -> None:
    """When the task reading inotify is cancelled, another waiting consumer still gets woken."""
    got: list[bytes] = []
    with Writer(stream_path, partitions=2, notify=False) as writer:
        async with (
            adiskq.Consumer(stream_path, partition=0, poll_interval=60) as first,
            adiskq.Consumer(stream_path, partition=1, poll_interval=60) as second,
        ):
            first_scope = anyio.CancelScope()

            async def wait_first() -> None:
                with first_scope:
                    await first.__anext__()

            async def wait_second() -> None:
                got.append((await second.__anext__()).value)

            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(wait_first)  # the first to wait reads inotify for the loop
                    await wait_all_tasks_blocked()
                    tg.start_soon(wait_second)
                    await wait_all_tasks_blocked()
                    first_scope.cancel()
                    await wait_all_tasks_blocked()
                    writer.append([b"one"], partition=1)
    assert got == [b"one"]


async def test_an_event_queue_overflow_wakes_every_consumer(stream_path: str) -> None:
    """When the kernel's event queue overflows and drops a commit's event, consumers are still woken."""
    with Writer(stream_path, notify=False) as writer:
        folder = os.path.join(stream_path, PARTS_DIR, partition_dir_name(0))
        async with adiskq.Consumer(stream_path, poll_interval=60) as consumer:
            with anyio.fail_after(20):
                async with anyio.create_task_group() as tg:
                    got: list[bytes] = []

                    async def read() -> None:
                        got.append((await consumer.__anext__()).value)

                    tg.start_soon(read)
                    await wait_all_tasks_blocked()
                    flood_folder(folder, 17_000)  # more than max_queued_events (16384), loop blocked
                    writer.append([b"after the flood"])  # its IN_MODIFY is dropped: the queue is full
    assert got == [b"after the flood"]


def flood_folder(folder: str, count: int) -> None:
    """Queue ``count`` inotify events: create (and delete, which is not watched) stray files."""
    for i in range(count):
        name = os.path.join(folder, f"stray-{i}")
        os.close(os.open(name, os.O_CREAT | os.O_WRONLY, 0o644))
        os.unlink(name)


async def test_a_consumer_in_another_threads_event_loop_is_woken(stream_path: str, anyio_backend: str) -> None:
    """Consumers in two event loops of one process share the inotify instance and both get woken."""
    got: list[bytes] = []
    other_waiting = threading.Event()  # the other loop's consumer sleeps, waiting for a wake-up
    other_got = threading.Event()
    with Writer(stream_path, partitions=2, notify=False) as writer:

        async def in_other_loop() -> None:
            async with (
                adiskq.Consumer(stream_path, partition=1, poll_interval=60) as consumer,
                anyio.create_task_group() as tg,
            ):

                async def read() -> None:
                    got.append((await consumer.__anext__()).value)
                    other_got.set()

                tg.start_soon(read)
                await wait_all_tasks_blocked()
                other_waiting.set()

        def other_thread() -> None:
            anyio.run(in_other_loop, backend=anyio_backend)

        async with adiskq.Consumer(stream_path, partition=0, poll_interval=60) as here:
            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(functools.partial(anyio.to_thread.run_sync, other_thread))
                    tg.start_soon(next_message, here)
                    assert await anyio.to_thread.run_sync(other_waiting.wait, 10)
                    await wait_all_tasks_blocked()  # and this loop's too
                    writer.append([b"for the other loop"], partition=1)
                    assert await anyio.to_thread.run_sync(other_got.wait, 10)
                    writer.append([b"for this loop"], partition=0)
    assert got == [b"for the other loop"]
    assert inotify_instances() == 1


async def test_polling_alone_delivers(stream_path: str, polling: None) -> None:
    """With inotify forced off (ADISKQ_NOTIFY=poll), a consumer still gets commits from the poll."""
    with Writer(stream_path, notify=False) as writer:
        async with adiskq.Consumer(stream_path) as consumer:
            assert consumer.uses_inotify is False
            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(next_message, consumer)
                    await wait_all_tasks_blocked()
                    writer.append([b"polled"])
            assert consumer.position == 1


async def test_a_commit_in_a_worker_thread_wakes_the_consumer_directly(stream_path: str, polling: None) -> None:
    """wakeup.notify from a worker thread wakes a consumer in the event loop, without inotify or the poll."""
    with Writer(stream_path) as writer:
        async with adiskq.Consumer(stream_path, poll_interval=60) as consumer:
            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(next_message, consumer)
                    await wait_all_tasks_blocked()
                    await anyio.to_thread.run_sync(functools.partial(writer.append, [b"from a thread"]))
            assert consumer.position == 1


async def test_a_producer_in_this_process_wakes_the_consumer_directly(stream_path: str, polling: None) -> None:
    """A Producer's commit wakes a consumer of the same process without inotify or the poll."""
    async with (
        adiskq.Producer(stream_path) as producer,
        adiskq.Consumer(stream_path, start="newest", poll_interval=60) as consumer,
    ):
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(next_message, consumer)
                await wait_all_tasks_blocked()
                await producer.push(b"direct")
        assert consumer.position == 1


async def test_a_consumer_beside_its_producer_watches_nothing(stream_path: str) -> None:
    """A consumer of a partition in its producer's process holds no inotify watch: the producer wakes it directly."""
    async with (
        adiskq.Producer(stream_path) as producer,
        adiskq.Consumer(stream_path, partition=0, start="newest", poll_interval=60) as consumer,
    ):
        assert consumer.uses_inotify is False
        notifier = notify.get_notifier()
        assert not any(watch.waiters for watch in notifier._by_path.values())
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(next_message, consumer)
                await wait_all_tasks_blocked()
                await producer.push(b"direct")
        assert consumer.position == 1


PUSH_ONE = """
import sys, anyio, adiskq
async def main():
    async with adiskq.Producer(sys.argv[1]) as producer:
        await producer.push(b"from elsewhere")
anyio.run(main)
"""


async def test_a_consumer_notices_its_producer_moved_to_another_process(stream_path: str) -> None:
    """When the local producer closes and another process produces, the consumer is woken and watches again."""
    async with adiskq.Producer(stream_path):
        consumer = adiskq.Consumer(stream_path, poll_interval=0.1)
        await consumer.__aenter__()
        assert consumer.uses_inotify is False
    try:
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(next_message, consumer)
                await anyio.run_process([sys.executable, "-c", PUSH_ONE, stream_path])
        assert consumer.position == 1
        assert consumer.uses_inotify is True
    finally:
        await consumer.aclose()


async def test_without_an_inotify_instance_consumers_poll(stream_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """When inotify cannot be had (the per-user instance limit), consumers fall back to polling."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(notify.asyncinotify, "Inotify", refuse)
    notify.reset_notifier()
    try:
        with Writer(stream_path, notify=False) as writer:
            async with adiskq.Consumer(stream_path, poll_interval=0.01) as consumer:
                assert consumer.uses_inotify is False
                with anyio.fail_after(10):
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(next_message, consumer)
                        await wait_all_tasks_blocked()
                        writer.append([b"polled"])
                assert consumer.position == 1
    finally:
        monkeypatch.undo()
        notify.reset_notifier()


async def test_commits_nobody_waited_for_do_not_stop_later_wake_ups(stream_path: str) -> None:
    """A commit that lands while no consumer of the loop waits leaves the next wait woken as usual."""
    with Writer(stream_path, notify=False) as writer:
        async with adiskq.Consumer(stream_path, poll_interval=60) as consumer:
            with anyio.fail_after(10):
                for round_ in range(3):
                    writer.append([b"unwaited %d" % round_])
                    await wait_all_tasks_blocked()  # the loop sees the event with nobody waiting
                    assert await next_message(consumer) == b"unwaited %d" % round_
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(next_message, consumer)
                        await wait_all_tasks_blocked()
                        writer.append([b"waited %d" % round_])
            assert consumer.position == 6


async def test_a_closed_notifier_leaves_no_reader_in_the_event_loop(stream_path: str, anyio_backend: str) -> None:
    """Closing the notifier unregisters its descriptor from the loop; waiting consumers fall back to the poll."""
    with Writer(stream_path, notify=False) as writer:
        notifier = notify.get_notifier()
        fd = notifier._inotify.fd if notifier._inotify is not None else -1
        try:
            async with adiskq.Consumer(stream_path, poll_interval=0.05) as consumer:
                with anyio.fail_after(10):
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(next_message, consumer)
                        await wait_all_tasks_blocked()
                        writer.append([b"woken by inotify"])
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(next_message, consumer)
                        await wait_all_tasks_blocked()
                        notifier.close()
                        writer.append([b"woken by the poll"])
                assert consumer.position == 2
            if anyio_backend == "asyncio":  # Trio's wait_readable registers only while it waits
                assert not asyncio.get_running_loop().remove_reader(fd)
        finally:
            notify.reset_notifier()


@pytest.mark.parametrize("poll_interval", [0.05, 0.1])
async def test_a_consumer_polling_often_sleeps_between_polls(stream_path: str, poll_interval: float) -> None:
    """A consumer polling every 50 or 100 ms is seen asleep between polls, look after look.

    anyio's own wait_all_tasks_blocked never saw it so on asyncio: its 0.1 s look fell in the loop
    turn of the poll's timer, every time (tests/support/blocked.py).
    """
    with Writer(stream_path, notify=False) as writer:
        async with adiskq.Consumer(stream_path, poll_interval=poll_interval) as consumer:
            with anyio.fail_after(5):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(next_message, consumer)
                    for _ in range(5):
                        await wait_all_tasks_blocked()
                    writer.append([b"woken"])
            assert consumer.position == 1


class Looks:
    """How many times this test's consumers looked at their partition (``Consumer._read_some``)."""

    def __init__(self) -> None:
        self.count = 0


@pytest.fixture
def looks(monkeypatch: pytest.MonkeyPatch) -> Looks:
    counter = Looks()
    read_some = adiskq.Consumer._read_some

    def counted(consumer: adiskq.Consumer, max_messages: int) -> list[adiskq.Message]:
        counter.count += 1
        return read_some(consumer, max_messages)

    monkeypatch.setattr(adiskq.Consumer, "_read_some", counted)
    return counter


async def assert_asleep(looks: Looks) -> None:
    """Every task of the loop sleeps, and while the loop turns a hundred times no consumer looks."""
    await wait_all_tasks_blocked()
    looks_while_asleep = looks.count
    for _ in range(100):
        await anyio.lowlevel.checkpoint()
    await wait_all_tasks_blocked()
    assert looks.count == looks_while_asleep


async def test_a_waiting_consumer_does_not_run_until_woken(stream_path: str, looks: Looks) -> None:
    """After handing out its buffered messages, a consumer sleeps: the loop turns and it reads nothing."""
    got: list[bytes] = []
    with Writer(stream_path, notify=False) as writer:
        writer.append([b"a", b"b", b"c"])
        async with adiskq.Consumer(stream_path, poll_interval=60) as consumer:

            async def read() -> None:
                async for message in consumer:  # b and c come from the buffer (the compiled core's Ready)
                    got.append(message.value)
                    if len(got) == 4:
                        return

            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(read)
                    await wait_all_tasks_blocked()
                    assert got == [b"a", b"b", b"c"]
                    await assert_asleep(looks)
                    writer.append([b"d"])
    assert got == [b"a", b"b", b"c", b"d"]


async def test_removed_watches_leave_nothing_behind(stream_path: str) -> None:
    """Consumers opened and closed many times leave no watch in the notifier or in asyncinotify's table."""
    with Writer(stream_path, notify=False) as writer:
        writer.append([b"x"])
        notifier = notify.get_notifier()
        assert notifier._inotify is not None
        for _ in range(20):
            async with adiskq.Consumer(stream_path) as consumer:
                assert (await consumer.__anext__()).value == b"x"
                await wait_once(consumer)
                assert notifier._by_wd
        notifier.dispatch()  # the kernel's IN_IGNORED events for the removed watches
        assert notifier._by_path == {}
        assert notifier._by_wd == {}
        assert notifier._inotify._watches == {}


async def test_a_consumer_woken_by_inotify_sleeps_again_until_the_next_commit(stream_path: str, looks: Looks) -> None:
    """After a wake-up from the kernel a consumer waits again without looking: the events it was
    woken by are read (on Trio, before it waits again), so they do not wake it a second time."""
    got: list[bytes] = []
    arrivals = [anyio.Event() for _ in range(3)]
    with Writer(stream_path, notify=False) as writer:
        async with adiskq.Consumer(stream_path, poll_interval=60) as consumer:
            assert consumer.uses_inotify

            async def read() -> None:
                async for message in consumer:
                    got.append(message.value)
                    arrivals[len(got) - 1].set()
                    if len(got) == 3:
                        return

            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(read)
                    for arrived, value in zip(arrivals[:2], [b"a", b"b"], strict=True):
                        await wait_all_tasks_blocked()
                        writer.append([value])
                        await arrived.wait()
                        await assert_asleep(looks)  # the consumer waits again
                    writer.append([b"c"])
    assert got == [b"a", b"b", b"c"]


@pytest.fixture
def unwatchable(monkeypatch: pytest.MonkeyPatch) -> collections.abc.Iterator[None]:
    """inotify works, but no file can be watched (the per-user watch limit): nothing the kernel
    sees wakes a consumer opened in this test, which still waits on the descriptor."""

    def refuse(self: object, path: object, mask: object) -> None:
        raise OSError(28, "No space left on device")  # inotify_add_watch's ENOSPC: the watch limit

    monkeypatch.setattr(notify.asyncinotify.Inotify, "add_watch", refuse)
    notify.reset_notifier()
    yield
    monkeypatch.undo()
    notify.reset_notifier()


async def append_each_while_it_waits(writer: Writer, consumer: adiskq.Consumer, values: list[bytes]) -> None:
    """Commit each value while ``consumer`` waits for its next message; returns once it has them all."""
    for value in values:
        async with anyio.create_task_group() as tg:
            tg.start_soon(next_message, consumer)
            await wait_all_tasks_blocked()
            writer.append([value])


async def test_a_consumer_waiting_on_inotify_is_woken_by_its_poll(stream_path: str, unwatchable: None) -> None:
    """The deadline of a wait ends it although the descriptor it reads stays quiet: the poll delivers."""
    with Writer(stream_path, notify=False) as writer:
        async with adiskq.Consumer(stream_path, poll_interval=0.05) as consumer:
            assert consumer.uses_inotify
            with anyio.fail_after(10):
                await append_each_while_it_waits(writer, consumer, [b"polled", b"polled again"])
            assert consumer.position == 2


async def test_a_consumer_waiting_on_inotify_is_woken_directly(stream_path: str, unwatchable: None) -> None:
    """A commit in this process ends the wait of a consumer that reads the descriptor for its loop
    (a producer came into this process since the consumer chose inotify; its next poll would notice)."""
    with Writer(stream_path, notify=False) as writer:
        async with adiskq.Consumer(stream_path, poll_interval=60) as consumer:
            assert consumer.uses_inotify
            writer.notify = True  # from now on it calls wakeup.notify after each commit, as a Producer does
            with anyio.fail_after(10):
                await append_each_while_it_waits(writer, consumer, [b"direct", b"direct again"])
            assert consumer.position == 2


async def test_two_paths_to_one_stream_wake_both_consumers_and_the_one_left(stream_path: str) -> None:
    """Two consumers following one stream by two paths (one through a symlinked folder) share the
    kernel's watch: both are woken by inotify, and the one left still is once the other closed."""
    link = stream_path + "-link"
    os.symlink(stream_path, link)
    with Writer(stream_path, notify=False) as writer:
        writer.append([b"before"])
        first = adiskq.Consumer(stream_path, start="newest", poll_interval=60)  # only inotify wakes them
        second = adiskq.Consumer(link, start="newest", poll_interval=60)
        async with second:
            async with first:
                with anyio.fail_after(10):
                    async with anyio.create_task_group() as group:
                        got: list[bytes] = []

                        async def read(consumer: adiskq.Consumer) -> None:
                            got.append(await next_message(consumer))

                        group.start_soon(read, first)
                        group.start_soon(read, second)
                        await wait_all_tasks_blocked()
                        writer.append([b"both"])
                assert got == [b"both", b"both"]
            with anyio.fail_after(10):
                async with anyio.create_task_group() as group:
                    group.start_soon(read, second)
                    await wait_all_tasks_blocked()
                    writer.append([b"left"])
            assert got[-1] == b"left"


async def test_a_wait_ends_at_its_own_deadline_whatever_the_waits_before_it() -> None:
    """A wait not woken ends at its own deadline, neither before nor long after, whether the wait
    before it was longer (woken early) or shorter (woken at once, its time still to come)."""
    notifier = notify.get_notifier()
    waiter = wakeup.Waiter()

    async def wait(seconds: float, *, woken: bool) -> float:
        """Seconds a wait of at most ``seconds`` took; ``woken``: another task wakes it once it sleeps."""
        waiter.arm()
        started = anyio.current_time()
        try:
            async with anyio.create_task_group() as tg:
                if woken:

                    async def wake_when_asleep() -> None:
                        await wait_all_tasks_blocked()
                        waiter.wake()

                    tg.start_soon(wake_when_asleep)
                await notifier.wait(waiter, seconds)
            assert waiter.fired == woken
        finally:
            waiter.disarm()
        return anyio.current_time() - started

    with anyio.fail_after(30):
        assert await wait(60, woken=True) < 30
        assert 0.29 <= await wait(0.3, woken=False) < 10  # its deadline before the last wait's
        assert await wait(0.2, woken=True) < 10  # long enough for the waker to run on a busy machine
        assert 0.29 <= await wait(0.3, woken=False) < 10  # the last wait's deadline passes during it


def test_a_waiter_that_moves_to_another_event_loop_waits_in_that_loop() -> None:
    """A waiter armed in one loop and then in another (asyncio, Trio, a new asyncio loop) takes each
    loop's own waits when it arms there: its deadline is kept by the loop it waits in, and a wake
    from another thread reaches it there."""
    notifier = notify.Notifier(polling=True)
    waiter = wakeup.Waiter()
    seen: list[str] = []

    async def in_one_loop() -> None:
        with anyio.fail_after(30):
            waiter.arm()
            seen.append(type(waiter.waits).__name__)
            await notifier.wait(waiter, 0.05, kernel=False)  # nobody wakes it: it ends at its deadline
            assert not waiter.fired
            waiter.disarm()
            waiter.arm()
            waker = threading.Thread(target=waiter.wake)  # the wake may land before the wait: kept
            waker.start()
            await notifier.wait(waiter, 60, kernel=False)
            waker.join()
            assert waiter.fired
            assert not waiter.expired
            waiter.disarm()

    for backend in ("asyncio", "trio", "asyncio"):
        anyio.run(in_one_loop, backend=backend)
    assert seen == ["AsyncioWaits", "TrioWaits", "AsyncioWaits"]
