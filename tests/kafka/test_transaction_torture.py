"""Transactions under SIGKILL: transactional producer processes, a ``read_committed`` group member
and a library consumer of the gateway's streams are killed, and so is the gateway, around commits and
aborts, and started again; then what the readers read is counted against what the producers know.

Every worker (transaction_torture_workers.py) prints its events, and the test keeps every line it
read before a kill. A producer's transaction K is, by its lines:

- committed (``committed K``): a reader must have each of its records exactly once — at one offset
  (read again after a consumer restart at that same offset, which is not a duplicate);
- aborted (``aborted K``, or ``aborting K`` and then killed, or never past ``begin K``): no reader may
  see any of its records;
- in doubt (``committing K`` and then killed, or a fatal error): all of its records or none.

Per partition, each producer's records must come in the order it wrote them. The accounting is
printed and asserted for the group member, the library consumer, and, at the end, a fresh
``read_committed`` consumer and a fresh library read of the whole topic.

The same harness runs against Apache Kafka (its node is shared by the run, so there only the clients
are killed): the accounting is Kafka's reference. A short sampled run is part of the normal suite;
``-m slow`` runs a long random one.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import pathlib
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from differential import Side
from support.gateway_start import listening_port
from transaction_support import COMMITTED, read_to_end
from transaction_torture_workers import RECORDS

import adiskq

WORKERS = pathlib.Path(__file__).resolve().parent / "transaction_torture_workers.py"
PARTITIONS = 3
PRODUCERS = 2
DEADLINE = 90.0  # seconds any one wait may take before the test fails
RECORD = re.compile(r"record (\d+) (\d+) ?(.*)")  # the value may be empty (a marker shown as a record)
WRITTEN = re.compile(r"(.+):(\d+):(\d+)")  # a value a producer wrote: ID:K:J
EVENT = re.compile(r"(begin|committing|committed|aborting|aborted|fatal) (\d+)\b")
EXITED = "exited"  # the line the test adds when a worker's output ends
STARTED = "started"  # the line the test adds once a worker (re)started is ready


# --- processes ------------------------------------------------------------------------------------


class Worker:
    """One worker process (started again after each kill): every line it printed, in order."""

    def __init__(self, name: str, args: Callable[[], list[str]], journal: Journal, log_path: pathlib.Path) -> None:
        self.name = name
        self.args = args  # the arguments of its next start (a restart resumes where it was)
        self.journal = journal
        self.log_path = log_path  # its stderr, every start appended
        self.kills = 0
        self.process: subprocess.Popen[str] | None = None
        self.start()

    def start(self) -> None:
        """Start it and wait for its ``ready`` line (failing with its log if it exits first)."""
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, str(WORKERS), *self.args()],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
        ready = threading.Event()
        self.ready = False
        self.reading = threading.Thread(target=self._read, args=(self.process, ready), daemon=True)
        self.reading.start()
        ready.wait(DEADLINE)
        if not self.ready:
            self.process.kill()
            self.process.wait()
            assert self.process.stdin is not None
            self.process.stdin.close()
            self.reading.join(DEADLINE)
            pytest.fail(f"{self.name} did not start:\n{self.log_path.read_text()[-3000:]}")
        self.journal.add(self.name, STARTED)

    def _read(self, process: subprocess.Popen[str], ready: threading.Event) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if line.strip() == "ready":
                self.ready = True
                ready.set()
            else:
                self.journal.add(self.name, line.strip())
        process.stdout.close()
        self.journal.add(self.name, EXITED)
        ready.set()  # it exited: start() says so at once, not after DEADLINE

    def kill(self) -> None:
        """SIGKILL it, wait for it, start it again."""
        assert self.process is not None
        assert self.process.stdin is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(DEADLINE)
        self.process.stdin.close()
        self.reading.join(DEADLINE)
        self.kills += 1
        self.start()

    def restart_if_exited(self) -> bool:
        """Start it again if it exited on its own (a producer's fatal error); whether it had."""
        assert self.process is not None
        if self.journal.lines[self.name][-1:] != [EXITED] and self.process.poll() is None:
            return False
        self.process.wait(DEADLINE)  # its output ended: it is exiting
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.reading.join(DEADLINE)
        self.start()
        return True

    def stop(self) -> None:
        """Close its stdin (a producer finishes its transaction and exits), then SIGKILL what is left."""
        assert self.process is not None
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(DEADLINE)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Journal:
    """Every line of every worker, in the order read; waits for a line that matches."""

    def __init__(self) -> None:
        self.lines: dict[str, list[str]] = collections.defaultdict(list)
        self._changed = threading.Condition()

    def add(self, name: str, line: str) -> None:
        with self._changed:
            self.lines[name].append(line)
            self._changed.notify_all()

    def wait_for(self, name: str, pattern: str, after: int = 0) -> tuple[int, str]:
        """Wait until a line of ``name`` past the first ``after`` matches: the first such (index, line)."""

        def first() -> tuple[int, str] | None:
            for index in range(after, len(self.lines[name])):
                if re.fullmatch(pattern, self.lines[name][index]):
                    return index, self.lines[name][index]
            return None

        with self._changed:
            found = self._changed.wait_for(first, DEADLINE)
            assert found, f"{name} printed no {pattern!r} within {DEADLINE} s: {self.lines[name][-5:]}"
            return found

    def wait_until(self, condition: Callable[[], bool], what: str) -> None:
        """Wait until ``condition()`` holds (checked at each new line)."""
        with self._changed:
            if not self._changed.wait_for(condition, DEADLINE):
                tails = {name: lines[-4:] for name, lines in self.lines.items()}
                pytest.fail(f"not within {DEADLINE} s: {what}; the workers' last lines: {tails}")

    def count(self, name: str) -> int:
        with self._changed:
            return len(self.lines[name])

    def records(self, name: str) -> list[tuple[int, int, str]]:
        """(partition, offset, value) of each record line of ``name``."""
        with self._changed:
            lines = list(self.lines[name])
        return [(int(m[1]), int(m[2]), m[3]) for m in map(RECORD.fullmatch, lines) if m]


# --- servers --------------------------------------------------------------------------------------


@dataclasses.dataclass
class Gateway:
    """``adiskq serve ROOT`` in a process of its own, SIGKILLed and started again on the same port."""

    root: pathlib.Path
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    draining: threading.Thread = dataclasses.field(default_factory=threading.Thread)
    kills: int = 0

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "adiskq", "serve", str(self.root), "--kafka", f"127.0.0.1:{self.port}"],
            stderr=subprocess.PIPE,
        )
        assert self.process.stderr is not None
        self.port = listening_port(self.process.stderr)
        self.draining = threading.Thread(target=_drain, args=(self.process.stderr,), daemon=True)  # its log
        self.draining.start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(DEADLINE)
        self.draining.join(DEADLINE)
        self.kills += 1
        self.start()

    def stop(self) -> None:
        if self.process is not None:
            if self.process.poll() is None:
                self.process.terminate()
                self.process.wait(DEADLINE)
            self.draining.join(DEADLINE)


def _drain(stream: Any) -> None:
    """Read a pipe to its end, then close it."""
    with stream:
        stream.read()


# --- the accounting -------------------------------------------------------------------------------


@dataclasses.dataclass
class Outcomes:
    """Each transaction's outcome as its producer's lines tell it: {(producer, K): state}."""

    states: dict[tuple[str, int], str]

    @classmethod
    def of(cls, journal: Journal, producers: list[str]) -> Outcomes:
        states: dict[tuple[str, int], str] = {}
        for name in producers:
            for line in journal.lines[name]:
                found = EVENT.match(line)
                if found:
                    states[(name, int(found[2]))] = found[1]
        return cls(states)

    def committed(self) -> set[tuple[str, int]]:
        return {key for key, state in self.states.items() if state == "committed"}

    def in_doubt(self) -> set[tuple[str, int]]:
        return {key for key, state in self.states.items() if state in ("committing", "fatal")}

    def aborted(self) -> set[tuple[str, int]]:
        return {key for key, state in self.states.items() if state in ("begin", "aborting", "aborted")}


def values_of(transaction: tuple[str, int]) -> set[str]:
    """The record values transaction K of a producer wrote."""
    producer, k = transaction
    return {f"{producer}:{k}:{j}" for j in range(RECORDS)}


def account(reader: str, records: list[tuple[int, int, str]], outcomes: Outcomes) -> dict[str, Any]:
    """What ``reader`` read against the outcomes: printed, and the counts returned."""
    at: dict[tuple[int, int], str] = {}
    conflicts = 0
    for partition, offset, value in records:
        if at.setdefault((partition, offset), value) != value:
            conflicts += 1  # two values at one offset
    where: dict[str, list[tuple[int, int]]] = collections.defaultdict(list)
    for position, value in at.items():
        where[value].append(position)
    duplicates = sum(len(positions) - 1 for value, positions in where.items() if WRITTEN.fullmatch(value))
    seen = set(where)
    committed = outcomes.committed()
    lost = sum(len(values_of(t) - seen) for t in committed)
    aborted_seen = sum(len(values_of(t) & seen) for t in outcomes.aborted())
    doubt_committed = doubt_aborted = torn = 0
    for transaction in outcomes.in_doubt():
        present = len(values_of(transaction) & seen)
        if present == len(values_of(transaction)):
            doubt_committed += 1
        elif present == 0:
            doubt_aborted += 1
        else:
            torn += 1
    out_of_order = 0
    for partition in range(PARTITIONS):
        last: dict[str, tuple[int, int]] = {}
        for offset in sorted(o for p, o in at if p == partition):
            written = WRITTEN.fullmatch(at[(partition, offset)])
            if written is None:
                continue  # counted below
            producer, k, j = written[1], int(written[2]), int(written[3])
            if last.get(producer, (-1, -1)) > (k, j):
                out_of_order += 1
            last[producer] = (k, j)
    unknown = sum(1 for value in at.values() if WRITTEN.fullmatch(value) is None)
    counts: dict[str, Any] = {
        "reader": reader,
        "records": len(at),
        "committed transactions": len(committed),
        "in doubt, all there": doubt_committed,
        "in doubt, none there": doubt_aborted,
        "aborted transactions": len(outcomes.aborted()),
        "duplicates": duplicates,
        "lost": lost,
        "aborted records seen": aborted_seen,
        "torn transactions": torn,
        "two values at one offset": conflicts,
        "out of order": out_of_order,
        "records no producer wrote": unknown,
    }
    print(f"{reader}: " + ", ".join(f"{name} {count}" for name, count in counts.items() if name != "reader"))
    return counts


def assert_exactly_once(counts: dict[str, Any]) -> None:
    """Every committed transaction exactly once, nothing aborted, nothing torn, order kept."""
    for bad in (
        "duplicates",
        "lost",
        "aborted records seen",
        "torn transactions",
        "two values at one offset",
        "out of order",
        "records no producer wrote",
    ):
        assert counts.get(bad, 0) == 0, f"{counts['reader']}, {bad}: {counts[bad]}"
    assert counts["committed transactions"] > 0


# --- the run --------------------------------------------------------------------------------------


@dataclasses.dataclass
class Torture:
    """The workers of one run, over one topic of ``PARTITIONS`` partitions."""

    bootstrap: Callable[[], str]
    topic: str
    stream: pathlib.Path | None  # the topic's stream folder, for the library consumer (gateway only)
    logs: pathlib.Path  # a folder for the workers' stderr
    journal: Journal = dataclasses.field(default_factory=Journal)
    producers: list[Worker] = dataclasses.field(default_factory=list)
    readers: list[Worker] = dataclasses.field(default_factory=list)

    def start(self) -> None:
        for i in range(PRODUCERS):
            name = f"p{i}-{self.topic}"[:60]
            self.producers.append(Worker(name, self._producer_args(name), self.journal, self.logs / f"p{i}.log"))
        group = f"{self.topic}-g"
        self.readers.append(
            Worker(
                "group member",
                lambda: ["consumer", self.bootstrap(), self.topic, group],
                self.journal,
                self.logs / "group-member.log",
            )
        )
        if self.stream is not None:
            self.readers.append(
                Worker("library consumer", self._library_args, self.journal, self.logs / "library-consumer.log")
            )

    def _producer_args(self, name: str) -> Callable[[], list[str]]:
        def args() -> list[str]:
            numbers = [int(m[2]) for m in map(EVENT.match, self.journal.lines[name]) if m]
            first = max(numbers, default=-1) + 1
            return ["producer", self.bootstrap(), self.topic, str(PARTITIONS), name, str(first)]

        return args

    def _library_args(self) -> list[str]:
        next_offsets = dict.fromkeys(range(PARTITIONS), 0)
        for partition, offset, _value in self.journal.records("library consumer"):
            next_offsets[partition] = max(next_offsets[partition], offset + 1)
        return ["library", str(self.stream), *(f"{p}:{n}" for p, n in next_offsets.items())]

    def kill_at(self, worker: Worker, victim: Callable[[], None], pattern: str) -> None:
        """Wait for ``worker``'s next line matching ``pattern``, then kill ``victim`` at once. A
        producer that exited meanwhile (a fatal error after a gateway restart) is started again,
        whichever worker is waited for: without producers, no reader has anything to read."""
        after = self.journal.count(worker.name)
        journal = self.journal

        def exited() -> list[Worker]:
            return [w for w in [*self.producers, worker] if journal.lines[w.name][-1:] == [EXITED]]

        def matched() -> bool:
            return any(re.fullmatch(pattern, line) for line in journal.lines[worker.name][after:])

        while True:
            journal.wait_until(lambda: matched() or bool(exited()), f"{worker.name} printed {pattern!r}")
            if matched():
                break
            for stopped in exited():
                stopped.restart_if_exited()
        victim()
        for producer in self.producers:
            producer.restart_if_exited()

    def finish(self) -> Outcomes:
        """Stop the producers (each ends its transaction), then wait until every reader has read
        every committed transaction; the outcomes."""
        for producer in self.producers:
            producer.stop()
        outcomes = Outcomes.of(self.journal, [p.name for p in self.producers])
        wanted = set().union(*map(values_of, outcomes.committed()))
        for reader in self.readers:
            self.journal.wait_until(
                lambda reader=reader: wanted <= {value for _p, _o, value in self.journal.records(reader.name)},
                f"{reader.name} read every committed record",
            )
        return outcomes

    def stop(self) -> None:
        for worker in self.producers + self.readers:
            if worker.process is not None:
                if worker.process.poll() is None:
                    worker.process.kill()
                    worker.process.wait()
                assert worker.process.stdin is not None
                worker.process.stdin.close()
                worker.reading.join(DEADLINE)


def create_topic(bootstrap: str, topic: str) -> None:
    """Create the topic with PARTITIONS partitions."""
    client = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    client.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)


def library_read(stream: pathlib.Path) -> list[tuple[int, int, str]]:
    """Every record the library's Consumer gives of the stream, to its end as it is now."""

    async def main() -> list[tuple[int, int, str]]:
        async with adiskq.Consumer(str(stream), start="oldest", end="close") as consumer:
            return [(m.partition, m.offset, m.value.decode()) async for m in consumer]

    return anyio.run(main)


def final_reads(torture: Torture, outcomes: Outcomes, side: Side) -> Iterator[dict[str, Any]]:
    """The accounting of a fresh read_committed consumer and, on the gateway, a fresh library read."""
    seen = read_to_end(side, [(torture.topic, p) for p in range(PARTITIONS)], COMMITTED)
    yield account("fresh read_committed consumer", [(p, o, v.decode()) for _t, p, o, _k, v in seen], outcomes)
    if torture.stream is not None:
        yield account("fresh library read", library_read(torture.stream), outcomes)


def run_on_gateway(tmp_path: pathlib.Path, events: list[str], seed: int) -> None:
    """The torture against a gateway process: ``events`` are kills, each at the moment it names."""
    rng = random.Random(seed)
    gateway = Gateway(tmp_path / "root")
    gateway.root.mkdir()
    gateway.start()
    topic = "torture"
    torture = Torture(lambda: gateway.bootstrap, topic, gateway.root / topic, tmp_path)
    try:
        create_topic(gateway.bootstrap, topic)
        torture.start()
        for event in events:
            producer = rng.choice(torture.producers)
            match event:
                case "producer at commit":
                    torture.kill_at(producer, producer.kill, r"committing \d+")
                case "producer at abort":
                    torture.kill_at(producer, producer.kill, r"aborting \d+")
                case "gateway at commit":
                    torture.kill_at(producer, gateway.kill, r"committing \d+")
                case "gateway at abort":
                    torture.kill_at(producer, gateway.kill, r"aborting \d+")
                case "gateway after commit":
                    torture.kill_at(producer, gateway.kill, r"committed \d+")
                case "group member":
                    torture.kill_at(torture.readers[0], torture.readers[0].kill, r"record .*")
                case "library consumer":
                    torture.kill_at(torture.readers[1], torture.readers[1].kill, r"record .*")
        outcomes = torture.finish()
        kills = {w.name: w.kills for w in torture.producers + torture.readers}
        print(f"kills: gateway {gateway.kills}, " + ", ".join(f"{name} {count}" for name, count in kills.items()))
        counts = [account(reader.name, torture.journal.records(reader.name), outcomes) for reader in torture.readers]
        counts += final_reads(torture, outcomes, Side("gateway", gateway.bootstrap, "torture"))
    finally:
        torture.stop()
        gateway.stop()
    for each in counts:
        assert_exactly_once(each)


SAMPLED = ["producer at commit", "gateway at abort", "group member", "library consumer", "gateway after commit"]
KINDS = [*SAMPLED, "producer at abort", "gateway at commit"]


def test_transaction_torture_sampled(tmp_path: pathlib.Path) -> None:
    """One kill of each kind around commits and aborts: every committed transaction read exactly
    once by each reader, nothing aborted, nothing torn, per-partition order kept."""
    run_on_gateway(tmp_path, SAMPLED, seed=1)


@pytest.mark.slow
def test_transaction_torture(tmp_path: pathlib.Path) -> None:
    """Sixty kills, of kinds and producers drawn at random."""
    rng = random.Random(39)
    run_on_gateway(tmp_path, [rng.choice(KINDS) for _ in range(60)], seed=39)


def test_transaction_torture_on_kafka(kafka_broker: Any, tmp_path: pathlib.Path) -> None:
    """The same harness against Apache Kafka, killing its clients (its node is the run's, not the
    test's): Kafka's accounting, the reference the gateway's is held to."""
    topic = f"torture-{os.getpid()}-{time.monotonic_ns()}"
    rng = random.Random(2)
    torture = Torture(lambda: kafka_broker.bootstrap, topic, None, tmp_path)
    try:
        create_topic(kafka_broker.bootstrap, topic)
        torture.start()
        for pattern in (r"committing \d+", r"aborting \d+"):
            producer = rng.choice(torture.producers)
            torture.kill_at(producer, producer.kill, pattern)
        torture.kill_at(torture.readers[0], torture.readers[0].kill, r"record .*")
        outcomes = torture.finish()
        counts = [account(reader.name, torture.journal.records(reader.name), outcomes) for reader in torture.readers]
        counts += final_reads(torture, outcomes, Side("kafka", kafka_broker.bootstrap, topic))
    finally:
        torture.stop()
    for each in counts:
        assert_exactly_once(each)
