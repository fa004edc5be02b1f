"""A service tortured: HTTP producers under ``uvicorn --workers 2`` (examples/fastapi_service.py), two
workers of one consumer group with retries and dead letters (tests/support/service_worker.py), and
repeated SIGKILLs of both workers and of the service's worker processes while orders come in.

Every order acknowledged (201) must end processed or dead-lettered: lost = 0. The accounting is
printed: exactly once, more than once (and why: pushed twice by a client retrying after a killed
HTTP worker, or delivered again after a group worker was killed before its commit was stored),
dead-lettered, lost. And no message is delivered at attempt 1 after a commit past it was stored.

The normal run kills a few times over a few hundred orders; ``-m slow`` runs the long version.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

import httpx
import psutil
import pytest
from support.paths import ROOT_DIR
from support.waiting import wait_for

import adiskq

SERVICE = os.path.join(ROOT_DIR, "examples", "fastapi_service.py")
WORKER = os.path.join(ROOT_DIR, "tests", "support", "service_worker.py")
HTTP_WORKERS = 2


@dataclasses.dataclass
class Accounting:
    acknowledged: int
    exactly_once: int
    more_than_once: dict[str, int]  # why -> orders
    dead_lettered: int
    lost: list[str]
    again_after_stored: list[str]
    member_kills: int
    service_kills: int

    def print(self, label: str) -> None:
        print(
            f"\n{label}: {self.acknowledged} orders acknowledged, {self.member_kills} group-worker kills, "
            f"{self.service_kills} HTTP-worker kills\n"
            f"  exactly once:   {self.exactly_once}\n"
            f"  more than once: {sum(self.more_than_once.values())} {dict(self.more_than_once)}\n"
            f"  dead-lettered:  {self.dead_lettered}\n"
            f"  lost:           {len(self.lost)}\n"
            f"  delivered again after their commit was stored: {len(self.again_after_stored)}"
        )


class Members:
    """The group workers, each appending to a report of its own."""

    def __init__(self, folder: pathlib.Path, stream: str, dead: str, backend: str) -> None:
        self.folder, self.stream, self.dead, self.backend = folder, stream, dead, backend
        self.live: list[subprocess.Popen[bytes]] = []
        self.started = 0

    def start(self) -> None:
        report = self.folder / f"worker-{self.started}.log"
        self.started += 1
        with open(self.folder / f"worker-{self.started - 1}.stderr", "wb") as stderr:  # the child keeps its copy
            self.live.append(
                subprocess.Popen(
                    [sys.executable, WORKER, self.stream, self.dead, os.fspath(report), self.backend],
                    stdin=subprocess.DEVNULL,
                    stderr=stderr,
                )
            )

    def kill(self, index: int) -> None:
        victim = self.live.pop(index % len(self.live))
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)

    def lines(self) -> list[list[str]]:
        found = []
        for report in sorted(self.folder.glob("worker-*.log")):
            text = report.read_text()
            found.extend(line.split(" ") for line in text.splitlines())
        return found

    def stop(self) -> None:
        while self.live:
            self.kill(0)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def http_workers(service: subprocess.Popen[bytes]) -> list[psutil.Process]:
    """uvicorn's worker processes (spawned by multiprocessing; not its resource tracker)."""
    return [p for p in psutil.Process(service.pid).children() if "spawn_main" in " ".join(p.cmdline())]


def post_orders(url: str, numbers: list[str], attempts: collections.Counter[str]) -> set[str]:
    """Post each order until a 201 (a client retries after a killed HTTP worker: it may push twice)."""
    acknowledged = set()
    with httpx.Client(timeout=10) as client:
        for number in numbers:
            for _ in range(200):
                attempts[number] += 1
                try:
                    answer = client.post(
                        f"{url}/events", json={"type": "order", "key": f"k{number[-2:]}", "data": {"n": number}}
                    )
                except httpx.TransportError:
                    time.sleep(0.05)  # the client's back-off, as a real one has
                    continue
                if answer.status_code == 201:
                    acknowledged.add(number)
                    break
                time.sleep(0.05)
    return acknowledged


def dead_lettered(dead: str) -> collections.Counter[str]:
    try:
        stats = adiskq.stats(dead)
    except adiskq.StreamNotFoundError:
        return collections.Counter()
    found: collections.Counter[str] = collections.Counter()
    for partition in stats.partitions:
        for offset in range(partition.oldest_offset, partition.next_offset):
            found[json.loads(adiskq.read(dead, partition.partition, offset).value)["data"]["n"]] += 1
    return found


def pushed(stream: str) -> collections.Counter[str]:
    stats = adiskq.stats(stream)
    found: collections.Counter[str] = collections.Counter()
    for partition in stats.partitions:
        for offset in range(partition.oldest_offset, partition.next_offset):
            found[json.loads(adiskq.read(stream, partition.partition, offset).value)["data"]["n"]] += 1
    return found


def torture(folder: pathlib.Path, backend: str, *, orders: int, member_kills: int, service_kills: int) -> Accounting:
    stream, dead = os.fspath(folder / "orders"), os.fspath(folder / "orders-dead")
    port = free_port()
    log = folder / "service.log"
    with open(log, "wb") as output:
        service = subprocess.Popen(
            [sys.executable, SERVICE, "--stream", stream, "--port", str(port), "--workers", str(HTTP_WORKERS)],
            cwd=ROOT_DIR,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    members = Members(folder, stream, dead, backend)
    numbers = [str(i) for i in range(orders)]
    attempts: collections.Counter[str] = collections.Counter()
    try:
        wait_for(
            lambda: log.read_bytes().count(b"Application startup complete") == HTTP_WORKERS,
            "the HTTP workers' producers open",
            [os.fspath(folder)],
            processes=[service],  # type: ignore[list-item]
            timeout=60,
        )
        members.start()
        members.start()
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            posting = pool.submit(post_orders, f"http://127.0.0.1:{port}", numbers, attempts)
            kills = sorted(
                [("member", i) for i in range(member_kills)] + [("service", i) for i in range(service_kills)],
                key=lambda kill: (kill[1] + 1) / (member_kills if kill[0] == "member" else service_kills),
            )
            for number, (what, _) in enumerate(kills, start=1):
                # The moment: once the workers have delivered this share of the orders.
                wanted = orders * number // (len(kills) + 1)
                wait_for(
                    lambda wanted=wanted: (
                        sum(line[0] == "deliver" for line in members.lines()) >= wanted or posting.done()
                    ),
                    "deliveries before the next kill",
                    [os.fspath(folder)],
                    timeout=120,
                )
                if what == "member":
                    members.kill(number)
                    members.start()
                else:
                    startups = log.read_bytes().count(b"Application startup complete")
                    http_workers(service)[number % HTTP_WORKERS].send_signal(signal.SIGKILL)
                    wait_for(  # uvicorn's supervisor starts a new worker in its place
                        lambda startups=startups: log.read_bytes().count(b"Application startup complete") > startups,
                        "a new HTTP worker",
                        [os.fspath(folder)],
                        processes=[service],  # type: ignore[list-item]
                        timeout=60,
                    )
            acknowledged = posting.result(timeout=600)

        def finished() -> set[str]:
            lines = members.lines()
            return {line[4] for line in lines if line[0] == "done"} | set(dead_lettered(dead))

        wait_for(
            lambda: acknowledged <= finished(),
            "every acknowledged order processed or dead-lettered",
            [os.fspath(folder)],
            timeout=300,
        )
    finally:
        members.stop()
        service.send_signal(signal.SIGINT)
        try:
            service.wait(timeout=30)
        except subprocess.TimeoutExpired:
            service.kill()
            service.wait(timeout=30)
    return account(members.lines(), acknowledged, pushed(stream), dead_lettered(dead), member_kills, service_kills)


def account(
    lines: list[list[str]],
    acknowledged: set[str],
    pushes: collections.Counter[str],
    dead: collections.Counter[str],
    member_kills: int,
    service_kills: int,
) -> Accounting:
    done = collections.Counter(line[4] for line in lines if line[0] == "done")
    # Stored commits, by partition: (time, next offset) — every member's, a store is a store.
    stored: dict[int, list[tuple[float, int]]] = collections.defaultdict(list)
    for line in lines:
        if line[0] == "stored":
            for partition, offset in json.loads(line[1]).items():
                stored[int(partition)].append((float(line[2]), offset))
    again_after_stored = []
    for line in lines:
        if line[0] == "deliver" and line[3] == "1":
            partition, offset, at = int(line[1]), int(line[2]), float(line[5])
            if any(when < at and next_offset > offset for when, next_offset in stored[partition]):
                again_after_stored.append(" ".join(line))
    more: collections.Counter[str] = collections.Counter()
    exactly = 0
    for number in acknowledged:
        outcomes = done[number] + dead[number]
        if outcomes == 1:
            exactly += 1
        elif outcomes > 1:
            if pushes[number] > 1:
                more["pushed twice: a client retried after its HTTP worker was killed"] += 1
            else:
                more["delivered again: a group worker was killed before its commit was stored"] += 1
    return Accounting(
        acknowledged=len(acknowledged),
        exactly_once=exactly,
        more_than_once=dict(more),
        dead_lettered=sum(1 for number in acknowledged if dead[number]),
        lost=sorted(number for number in acknowledged if done[number] + dead[number] == 0),
        again_after_stored=again_after_stored,
        member_kills=member_kills,
        service_kills=service_kills,
    )


def check(accounting: Accounting, label: str) -> None:
    accounting.print(label)
    assert accounting.lost == []
    assert accounting.again_after_stored == []
    assert accounting.dead_lettered > 0  # the orders ending in 7 went there
    assert accounting.exactly_once > 0


@pytest.mark.timeout(600)
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_service_under_kills_loses_nothing_sampled(tmp_path: pathlib.Path, backend: str) -> None:
    """The sampled torture: 150 orders, three group-worker kills and one HTTP-worker kill."""
    check(torture(tmp_path, backend, orders=150, member_kills=3, service_kills=1), f"service torture ({backend})")


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_service_under_kills_loses_nothing(tmp_path: pathlib.Path, backend: str) -> None:
    """The long torture: 1,500 orders, sixteen group-worker kills and five HTTP-worker kills."""
    check(torture(tmp_path, backend, orders=1500, member_kills=16, service_kills=5), f"service torture ({backend})")
