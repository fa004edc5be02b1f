"""SIGKILL of the gateway while a transactional producer commits and aborts: after the restart, a
``read_committed`` Kafka consumer and a library reader read every committed transaction exactly
once, nothing of an aborted one, a transaction whose commit the kill cut short whole or not at all,
and each partition in order (sampled rounds; more under ``-m slow``). Each round prints its
accounting."""

from __future__ import annotations

import os
import pathlib
import random
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from support.gateway_start import listening_port

from adiskq._storage.stream import StreamReader

_TOPIC = "ledger"
_PARTITIONS = 2
_SECONDS = 10.0
_END_SECONDS = 3.0  # a commit or abort cut short by the kill fails after this


def _start_gateway(root: pathlib.Path, flush: str) -> tuple[subprocess.Popen[bytes], int]:
    """``adiskq serve ROOT`` on a free port (topics of two partitions); the process and its port."""
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "adiskq", "serve", str(root), "--kafka", "127.0.0.1:0"),
            *("--flush", flush, "--partitions", str(_PARTITIONS)),
        ],
        stderr=subprocess.PIPE,
    )
    assert process.stderr is not None
    return process, listening_port(process.stderr)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()
    process.wait(30)
    assert process.stderr is not None
    process.stderr.close()


class _Ledger:
    """What the producer was told of each transaction: committed, aborted, or in doubt (its end cut short)."""

    def __init__(self) -> None:
        self.committed: set[int] = set()
        self.aborted: set[int] = set()
        self.in_doubt: set[int] = set()
        self.records: dict[int, list[tuple[int, bytes]]] = {}  # transaction -> (partition, value), in order


def _transactions(bootstrap: str, ledger: _Ledger, first: int, rng: random.Random, kill: threading.Timer) -> int:
    """Run transactions numbered from ``first`` until the gateway dies: ``kill`` is started in a
    random transaction, just before its end (commit or abort) is asked for, so that it lands around
    the ending, before, during or after the markers. The next number."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": "ledger-writer",
            "transaction.timeout.ms": 10_000,
            "message.timeout.ms": 5_000,
            "socket.timeout.ms": 3_000,
            "reconnect.backoff.max.ms": 100,
        }
    )
    number = first
    kill_at = first + rng.randint(0, 12)
    producer.init_transactions(_SECONDS)
    while True:
        records = [(rng.randrange(_PARTITIONS), b"%d-%d" % (number, j)) for j in range(rng.randint(1, 20))]
        ledger.records[number] = records
        commit = rng.random() < 0.7
        try:
            producer.begin_transaction()
            for partition, value in records:
                producer.produce(_TOPIC, value, partition=partition)
            if not commit:
                producer.flush(_SECONDS)  # stored, then aborted (not dropped in the client)
            if number == kill_at:
                kill.start()
            if commit:
                producer.commit_transaction(_END_SECONDS)
                ledger.committed.add(number)
            else:
                producer.abort_transaction(_END_SECONDS)
                ledger.aborted.add(number)
        except KafkaException:
            ledger.in_doubt.add(number)
            return number + 1
        number += 1


def _read_committed(bootstrap: str, partition: int) -> list[bytes]:
    """Every value a librdkafka read_committed consumer reads from the partition, to its end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"audit-{uuid.uuid4()}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(_TOPIC, partition, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                return values
            values.append(message.value())
        raise AssertionError(f"partition {partition} was not read to its end in 60 s")
    finally:
        consumer.close()


def _check(ledger: _Ledger, partition: int, values: list[bytes], reader: str) -> tuple[int, set[int]]:
    """Assert what one reader read of one partition; (records read, in-doubt transactions seen)."""
    seen = [tuple(int(part) for part in value.split(b"-")) for value in values]
    assert len(set(seen)) == len(seen), f"{reader}: duplicates in partition {partition}"
    assert seen == sorted(seen), f"{reader}: partition {partition} out of order"
    numbers = {number for number, _ in seen}
    assert not numbers & ledger.aborted, f"{reader}: aborted transactions read: {sorted(numbers & ledger.aborted)}"
    for number in ledger.committed | (numbers & ledger.in_doubt):
        expected = [value for p, value in ledger.records[number] if p == partition]
        got = [value for value in values if value.startswith(b"%d-" % number)]
        assert got == expected, f"{reader}: transaction {number} in partition {partition}: {got} != {expected}"
    return len(values), numbers & ledger.in_doubt


def _round(root: pathlib.Path, seed: int) -> None:
    rng = random.Random(seed)
    flush = rng.choice(["async", "sync"])
    ledger = _Ledger()
    number = 0
    for _ in range(2):  # two lives of the gateway, each ended by SIGKILL in the middle of transactions
        process, port = _start_gateway(root, flush)
        killer = threading.Timer(rng.uniform(0, 0.05), lambda p=process: os.kill(p.pid, signal.SIGKILL))
        try:
            number = _transactions(f"127.0.0.1:{port}", ledger, number, rng, killer)
        finally:
            killer.cancel()
            _stop(process)
    process, port = _start_gateway(root, flush)  # the start aborts what was left open
    try:
        bootstrap = f"127.0.0.1:{port}"
        accounting = []
        reads = []
        for partition in range(_PARTITIONS):
            reads.append(_read_committed(bootstrap, partition))
            kafka_count, kafka_doubt = _check(ledger, partition, reads[-1], "read_committed")
            with StreamReader.open(str(root / _TOPIC)).partition(partition).cursor(0) as cursor:
                library = [message.value for message in cursor.read(100_000)]
            library_count, library_doubt = _check(ledger, partition, library, "library reader")
            assert kafka_count == library_count
            assert kafka_doubt == library_doubt
            accounting.append(kafka_count)
        # A transaction in doubt is whole or absent in every partition alike.
        for number in ledger.in_doubt:
            found = [
                any(value.startswith(b"%d-" % number) for value in reads[partition])
                for partition in {p for p, _ in ledger.records[number]}
            ]
            assert all(found) or not any(found), f"transaction {number} is half there: {found}"
    finally:
        _stop(process)
    print(
        f"seed {seed} ({flush}): {len(ledger.committed)} committed, {len(ledger.aborted)} aborted, "
        f"{len(ledger.in_doubt)} in doubt; records read per partition {accounting}; 0 duplicates, "
        "0 committed records lost, 0 aborted records read"
    )


def test_sigkill_around_commits_and_aborts(tmp_path: pathlib.Path) -> None:
    """One round (two kills)."""
    _round(tmp_path / "round", 1)


@pytest.mark.slow
@pytest.mark.timeout(1800)  # about half a minute a round
def test_sigkill_around_commits_and_aborts_many_rounds(tmp_path: pathlib.Path) -> None:
    """Twenty rounds of the same."""
    for seed in range(20):
        _round(tmp_path / f"round{seed}", 1000 + seed)
