"""The gateway under many clients at once, watched from outside (a subprocess): its memory stays
flat round after round of 100 concurrent clients producing and fetching."""

from __future__ import annotations

import asyncio
import pathlib

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from gateway_process import GatewayProcess

CLIENTS = 100  # half producers, half consumers, each with its own connection
PAIRS = CLIENTS // 2
RECORDS = 20  # per producer and round
VALUE = b"v" * 1024
WARM_ROUNDS = 3
ROUNDS = 10
GROWTH_BOUND_KIB = 4 * 1024  # what the peak RSS may still grow once warm, in all the rounds after


async def rounds(gateway: GatewayProcess, topic: str) -> list[int]:
    """50 idempotent producers and 50 consumers, all connected at once, for ROUNDS rounds: in each, producer i
    writes RECORDS records to partition i while consumer i reads them back. The gateway's peak RSS
    (KiB) after each round."""
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

        peaks = []
        for _ in range(ROUNDS):
            await asyncio.wait_for(
                asyncio.gather(*(produce(i) for i in range(PAIRS)), *(consume(i) for i in range(PAIRS))), 60
            )
            gateway.check_alive()
            peaks.append(gateway.memory_kib()[1])
        return peaks
    finally:
        await asyncio.gather(*(client.stop() for client in [*producers, *consumers]))


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_memory_stays_flat_under_100_concurrent_clients(tmp_path: pathlib.Path, backend: str) -> None:
    """Round after round of 100 concurrent clients producing and fetching, the gateway's peak memory
    (VmHWM) grows by less than 4 MiB over the seven rounds after the first three."""
    root = tmp_path / "root"
    root.mkdir()
    with GatewayProcess(root, backend, partitions=PAIRS) as gateway:
        peaks = asyncio.run(rounds(gateway, "load"))
        warm = peaks[WARM_ROUNDS - 1]
        assert peaks[-1] - warm < GROWTH_BOUND_KIB, f"peak RSS per round (KiB): {peaks}"
