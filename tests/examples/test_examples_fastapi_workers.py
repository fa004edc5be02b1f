"""examples/fastapi_service.py under uvicorn with four worker processes, every one a shared producer:
concurrent clients post events, and a consumer group reads every acknowledged event back once."""

from __future__ import annotations

import concurrent.futures
import json
import os
import pathlib
import signal
import subprocess
import sys

import anyio
import httpx
import pytest
from support.paths import ROOT_DIR
from support.waiting import wait_for
from test_examples_fastapi import free_port

import adiskq

ROOT = pathlib.Path(ROOT_DIR)
SERVICE = ROOT / "examples" / "fastapi_service.py"
WORKERS = 4
CLIENTS = 8
EVENTS_PER_CLIENT = 60

pytestmark = pytest.mark.timeout(120)


def post_events(url: str, client_number: int) -> list[tuple[int, int, str, str]]:
    """One client posting its events in turn: (partition, offset, what was posted, worker pid)."""
    receipts = []
    with httpx.Client(timeout=30) as client:
        for i in range(EVENTS_PER_CLIENT):
            what = f"c{client_number}-e{i}"
            answer = client.post(
                f"{url}/events", json={"type": "post", "key": f"c{client_number}", "data": {"n": what}}
            )
            assert answer.status_code == 201, answer.text
            receipts.append((answer.json()["partition"], answer.json()["offset"], what, answer.headers["X-Worker-Pid"]))
    return receipts


async def read_with_group(stream: str) -> list[adiskq.Message]:
    async with adiskq.ConsumerGroup(stream, name="audit", end="close") as group:
        messages = [message async for message in group]
        for message in messages:
            group.commit(message)
        return messages


def test_every_worker_produces_and_every_acknowledged_event_is_read_once(tmp_path: pathlib.Path) -> None:
    """Four uvicorn workers write one stream at once; every 201 reads back once, offsets contiguous."""
    stream = os.fspath(tmp_path / "events")
    port = free_port()
    log = tmp_path / "service.log"
    with open(log, "wb") as output:
        process = subprocess.Popen(
            [sys.executable, os.fspath(SERVICE), "--stream", stream, "--port", str(port), "--workers", str(WORKERS)],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        # Each worker logs this once its lifespan (its shared producer) is open.
        wait_for(
            lambda: log.read_bytes().count(b"Application startup complete") == WORKERS,
            "every worker to open its producer",
            [os.fspath(tmp_path)],
            processes=[process],
            timeout=60,
        )
        writers = adiskq.stats(stream).writers
        assert len(writers) == WORKERS
        assert all(w.shared for w in writers)
        with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
            results = list(pool.map(lambda n: post_events(url, n), range(CLIENTS)))
        receipts = [receipt for result in results for receipt in result]
        assert len({pid for *_, pid in receipts}) > 1  # several workers wrote
        messages = anyio.run(read_with_group, stream)
        process.send_signal(signal.SIGINT)  # as Ctrl+C: every worker's lifespan closes its producer
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        print(log.read_text())  # shown by pytest when the test failed
    by_offset = {(m.partition, m.offset): m for m in messages}
    assert len(by_offset) == len(messages) == len(receipts)  # read once each, nothing else stored
    for partition, offset, what, _ in receipts:
        assert json.loads(by_offset[(partition, offset)].value)["data"]["n"] == what
    for partition in adiskq.stats(stream).partitions:  # contiguous
        assert sorted(o for p, o in by_offset if p == partition.partition) == list(range(partition.next_offset))
    assert adiskq.stats(stream).writers == ()
