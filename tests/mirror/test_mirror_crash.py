"""Exactly once across SIGKILLs of the mirror: ``adiskq mirror`` processes killed at random moments
and started again, both ways, while several processes write the stream.

The normal run: one broker (``kafka_broker``), 4,000 messages, 4 kills each way; and adiskq's own
gateway as the cluster, on asyncio and on Trio, 2,000 messages, 3 kills each way. With ``-m slow``:
the three-node cluster (``kafka_cluster``, replication factor 3, min.insync.replicas=2) with one
broker SIGKILLed and restarted while the mirror ships, 100,000 messages and 20 kills each way. Each
prints its accounting. What is checked: every message in Kafka exactly once, for a
``read_committed`` reader, each writer's messages of a key in order; and back in a stream, every
record exactly once, in Kafka's offset order, per partition.
"""

from __future__ import annotations

import collections
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import IO

import pytest
from anyio.from_thread import start_blocking_portal
from mirror_support import KafkaRecord, create_topic, new_topic_name, read_topic

import adiskq
from adiskq._storage.stream import StreamReader
from adiskq._storage.upgrade import give_identity
from adiskq.kafka import KafkaGateway
from adiskq.kafka._mirror_kafka import read_positions, state_key
from adiskq.kafka._mirror_mapping import OFFSET_HEADER

WRITER = os.path.join(os.path.dirname(__file__), "mirror_writer.py")
PROCESS_DEADLINE = 600.0  # seconds a mirror or writer process may take before the test fails


def _mirror_command(source: str, target: str, *options: str) -> list[str]:
    return [sys.executable, "-m", "adiskq", "mirror", source, target, "--batch", "200", *options]


def _run_with_kills(
    command: list[str],
    kills: int,
    rng: random.Random,
    progress: Callable[[], int],
    between: Callable[[int], None] = lambda _: None,
) -> tuple[list[float], list[int]]:
    """Start ``command`` (a following mirror) ``kills`` times and SIGKILL it at a random moment each
    time after it said it started shipping (its first line); ``between(k)`` runs after the k-th kill,
    ``progress()`` says how far the mirror got. The moments (seconds after the first line) and the
    progress after each kill."""
    moments, got = [], []
    for k in range(kills):
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        assert process.stderr is not None
        with process.stderr:
            first = _first_line(process.stderr)
            assert first.startswith(b"mirroring"), first + process.stderr.read()
            moment = rng.uniform(0.0, 1.5)
            try:
                process.wait(moment)
            except subprocess.TimeoutExpired:
                process.send_signal(signal.SIGKILL)
                process.wait(PROCESS_DEADLINE)
            else:
                raise AssertionError(f"the mirror ended by itself: {process.stderr.read().decode()}")
        moments.append(moment)
        got.append(progress())
        between(k)
    return moments, got


def _first_line(pipe: IO[bytes]) -> bytes:
    """The first line a process writes to ``pipe``, skipping librdkafka's log lines (``%N|...``)."""
    while True:
        line = pipe.readline()
        if not line.startswith(b"%"):
            return line


def _finish(command: list[str]) -> str:
    """Run ``command --once`` to the end; its stderr (the progress lines)."""
    done = subprocess.run([*command, "--once"], capture_output=True, timeout=PROCESS_DEADLINE, check=False)
    assert done.returncode == 0, done.stderr.decode()
    return done.stderr.decode()


def _kills(moments: list[float], progress: list[int]) -> str:
    return "at (s after start: messages committed) " + ", ".join(
        f"{moment:.2f}: {got:,}" for moment, got in zip(moments, progress, strict=True)
    )


def _last_line(output: str) -> str:
    return output.strip().splitlines()[-1]


def _check_topic(records: list[KafkaRecord], writers: int, per_writer: int) -> None:
    counts = collections.Counter(record.value for record in records)
    repeated = {value: n for value, n in counts.items() if n > 1}
    expected = {b"w%d:%d" % (w, seq) for w in range(writers) for seq in range(per_writer)}
    assert not repeated, f"{len(repeated)} messages more than once, e.g. {list(repeated.items())[:5]}"
    assert set(counts) == expected, f"missing {len(expected - set(counts))}, unexpected {len(set(counts) - expected)}"
    last: dict[tuple[int, bytes | None, bytes], int] = {}
    for record in records:  # by partition and offset
        assert record.value is not None
        writer, seq = record.value.split(b":")
        key = (record.partition, record.key, writer)
        assert last.get(key, -1) < int(seq), (
            f"{record.key!r} of {writer!r} out of order in partition {record.partition}"
        )
        last[key] = int(seq)


def _check_stream(path: str, records: list[KafkaRecord]) -> None:
    stream = StreamReader.open(path)
    for partition in range(stream.partition_count):
        expected = [(r.offset, r.value) for r in records if r.partition == partition]
        reader = stream.partition(partition)
        oldest, end = reader.bounds()
        assert end - oldest == len(expected), (
            f"partition {partition}: {end - oldest} records, Kafka has {len(expected)}"
        )
        got: list[adiskq.Message] = []
        with reader.cursor(oldest) as cursor:
            while len(got) < end - oldest:
                got += cursor.read(10_000)
        assert [(int(m.headers[OFFSET_HEADER]), m.value) for m in got] == expected


def _torture(
    bootstrap: str,
    tmp_path: os.PathLike[str],
    *,
    writers: int,
    per_writer: int,
    kills: int,
    seed: int,
    seconds: float,
    between: Callable[[int], None] = lambda _: None,
    replication_factor: int = 1,
    cluster: str = "Kafka",
) -> None:
    rng = random.Random(seed)
    stream = os.path.join(tmp_path, "orders")
    back = os.path.join(tmp_path, "back")
    topic = new_topic_name("torture")
    url = f"kafka://{bootstrap}/{topic}"

    async def create() -> None:
        async with adiskq.Producer(stream, partitions=3):
            pass

    import anyio

    anyio.run(create)
    give_identity(stream)  # once, before the writers open it (they hold it open throughout)
    create_topic(bootstrap, topic, 3, replication_factor)
    started = time.monotonic()
    processes = [
        subprocess.Popen([sys.executable, WRITER, stream, f"w{w}", str(per_writer), str(seconds)])
        for w in range(writers)
    ]

    def shipped() -> int:
        stream_id = StreamReader.open(stream).settings.stream_id
        assert stream_id is not None
        prefix = state_key(stream_id, topic, 0)[:-1]
        positions = read_positions({"bootstrap.servers": bootstrap}, state_topic, prefix)
        return sum(position.next_offset for position in positions.values())

    def copied() -> int:
        if not os.path.exists(back):
            return 0
        reader = StreamReader.open(back)
        return sum(reader.partition(p).bounds()[1] for p in range(reader.partition_count))

    # Both ways at once, each killed at random moments: the copy back follows the topic as it fills.
    # A state topic of its own: the transactions its killed mirrors leave open hold back no other test's.
    state_topic = f"{topic}-state"
    forward = _mirror_command(stream, url, "--state-topic", state_topic)
    backward = _mirror_command(url, back)
    results: dict[str, tuple[list[float], list[int]]] = {}
    failures: list[BaseException] = []

    def kill_loop(name: str, command: list[str], progress: Callable[[], int], seed: int) -> None:
        try:
            results[name] = _run_with_kills(
                command, kills, random.Random(seed), progress, between if name == "forward" else lambda _: None
            )
        except BaseException as error:  # reported by the test's thread below
            failures.append(error)

    threads = [
        threading.Thread(target=kill_loop, args=("forward", forward, shipped, rng.randrange(2**32))),
        threading.Thread(target=kill_loop, args=("backward", backward, copied, rng.randrange(2**32))),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(PROCESS_DEADLINE * kills)
    if failures:
        raise failures[0]
    for process in processes:
        assert process.wait(PROCESS_DEADLINE) == 0
    finished = _finish(forward)
    records = read_topic(bootstrap, topic)
    _check_topic(records, writers, per_writer)
    finished_back = _finish(backward)
    _check_stream(back, records)
    moments, forward_progress = results["forward"]
    back_moments, back_progress = results["backward"]
    print(
        f"\nseed {seed}: {writers} writers x {per_writer:,} messages. To {cluster}: {kills} SIGKILLs, "
        f"{_kills(moments, forward_progress)}; then {_last_line(finished)!r}; {len(records):,} records in "
        f"{topic}, each exactly once, keys in order . Back: {kills} SIGKILLs, "
        f"{_kills(back_moments, back_progress)}; then {_last_line(finished_back)!r}; the stream holds "
        f"each record once in Kafka's offset order ({time.monotonic() - started:.0f} s in all)"
    )


def test_killed_mirrors_ship_each_message_exactly_once(kafka_broker: object, tmp_path: os.PathLike[str]) -> None:
    seed = random.randrange(2**32)
    bootstrap = kafka_broker.bootstrap  # type: ignore[attr-defined]
    _torture(bootstrap, tmp_path, writers=2, per_writer=2_000, kills=4, seed=seed, seconds=8.0)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_killed_mirrors_to_the_gateway_ship_each_message_exactly_once(
    backend: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """adiskq's own gateway as the mirror's target (and source, back): its transactions give the
    same exactly once as Kafka's; its position topic is made without compaction, which the gateway
    refuses."""
    seed = random.randrange(2**32)
    root = str(tmp_path_factory.mktemp("gateway-root"))
    with start_blocking_portal(backend=backend) as portal:
        gateway = KafkaGateway(root, port=0, partitions=1)
        with portal.wrap_async_context_manager(gateway):
            bootstrap = f"127.0.0.1:{gateway.port}"
            _torture(
                bootstrap,
                tmp_path_factory.mktemp("mirror"),
                writers=2,
                per_writer=1_000,
                kills=3,
                seed=seed,
                seconds=4.0,
                cluster=f"the gateway ({backend})",
            )


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_killed_mirrors_and_a_killed_broker_ship_each_message_exactly_once(
    kafka_cluster: object, tmp_path: os.PathLike[str]
) -> None:
    seed = random.randrange(2**32)
    kills = 20

    def broker_down_and_up(k: int) -> None:
        if k == kills // 3:
            kafka_cluster.kill(2)  # type: ignore[attr-defined]
        elif k == 2 * kills // 3:
            kafka_cluster.restart(2)  # type: ignore[attr-defined]

    _torture(
        kafka_cluster.bootstrap,  # type: ignore[attr-defined]
        tmp_path,
        writers=4,
        per_writer=25_000,
        kills=kills,
        seed=seed,
        seconds=60.0,
        between=broker_down_and_up,
        replication_factor=3,
    )
