"""The gateway under many clients at once, watched from outside (a subprocess): its memory stays
flat round after round of 100 concurrent clients producing and fetching.

What is watched is the memory the gateway holds between rounds (VmRSS), as a trend: the median of the
last rounds against the median of the first rounds once warm. One round's figure can move by a few
MiB without any growth (how many requests happen to be in flight at once, where the allocator put them),
and the peak (VmHWM) is the maximum of those moves, so it keeps creeping up with the number of rounds
even when nothing is kept; a median over several rounds does not, while memory kept a request or a
round raises every round after it.
"""

from __future__ import annotations

import asyncio
import pathlib
import statistics

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from gateway_process import GatewayProcess

CLIENTS = 100  # half producers, half consumers, each with its own connection
PAIRS = CLIENTS // 2
RECORDS = 20  # per producer and round
VALUE = b"v" * 1024
WARM_ROUNDS = 8  # the heaps grow to their working size over the first rounds (Trio's longer)
WINDOW = 6  # rounds whose median is compared: the first ones once warm, and the last ones
ROUNDS = 30  # the two windows 16 rounds apart: memory kept at 256 KiB a round (about 128 bytes a request) fails
GROWTH_BOUND_KIB = 4 * 1024  # what the held memory may grow from the first window to the last


async def rounds(gateway: GatewayProcess, topic: str) -> list[tuple[int, int]]:
    """50 idempotent producers and 50 consumers, all connected at once, for ROUNDS rounds: in each, producer i
    writes RECORDS records to partition i while consumer i reads them back. The gateway's (VmRSS, VmHWM)
    in KiB after each round."""
    bootstrap = gateway.bootstrap
    producers = [
        AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=0, enable_idempotence=True) for _ in range(PAIRS)
    ]
    consumers = [
        AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=200)
        for _ in range(PAIRS)
    ]
    await asyncio.gather(*(client.start() for client in [*producers, *consumers]))
    try:
        for i, consumer in enumerate(consumers):
            consumer.assign([TopicPartition(topic, i)])
            consumer.seek(TopicPartition(topic, i), 0)

        async def produce(i: int) -> None:
            sent = [await producers[i].send(topic, VALUE, partition=i) for _ in range(RECORDS)]
            await asyncio.gather(*sent)

        async def consume(i: int) -> None:
            partition = TopicPartition(topic, i)
            got = 0
            while got < RECORDS:
                batch = await consumers[i].getmany(partition, timeout_ms=1000)
                got += len(batch.get(partition, []))
            assert got == RECORDS

        memory = []
        for _ in range(ROUNDS):
            await asyncio.wait_for(
                asyncio.gather(*(produce(i) for i in range(PAIRS)), *(consume(i) for i in range(PAIRS))), 60
            )
            gateway.check_alive()
            memory.append(gateway.memory_kib())
        return memory
    finally:
        await asyncio.gather(*(client.stop() for client in [*producers, *consumers]))


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_memory_stays_flat_under_100_concurrent_clients(tmp_path: pathlib.Path, backend: str) -> None:
    """Round after round of 100 concurrent clients producing and fetching, the memory the gateway holds
    (median VmRSS of six rounds) grows by less than 4 MiB from the first rounds once warm to the last."""
    root = tmp_path / "root"
    root.mkdir()
    with GatewayProcess(root, backend, partitions=PAIRS) as gateway:
        memory = asyncio.run(rounds(gateway, "load"))
    held = [rss for rss, _peak in memory]
    first = statistics.median(held[WARM_ROUNDS : WARM_ROUNDS + WINDOW])
    last = statistics.median(held[-WINDOW:])
    assert last - first < GROWTH_BOUND_KIB, (
        f"held memory grew {last - first:.0f} KiB (median of rounds {WARM_ROUNDS + 1}-{WARM_ROUNDS + WINDOW}:"
        f" {first:.0f} KiB, of the last {WINDOW}: {last:.0f} KiB); VmRSS per round (KiB): {held};"
        f" VmHWM per round (KiB): {[peak for _rss, peak in memory]}"
    )
