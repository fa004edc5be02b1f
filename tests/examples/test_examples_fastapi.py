"""examples/fastapi_service.py, run as a real server on 127.0.0.1 and checked over HTTP and in Chromium."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator

import anyio
import httpx
import pytest
from support.paths import ROOT_DIR
from support.waiting import wait_for

import adiskq
from tests.support.chromium import Chromium

ROOT = pathlib.Path(ROOT_DIR)
SERVICE = ROOT / "examples" / "fastapi_service.py"

pytestmark = pytest.mark.timeout(90)


class Service:
    def __init__(self, stream: str, process: subprocess.Popen[bytes], url: str) -> None:
        self.stream = stream
        self.process = process
        self.url = url

    def post(self, type_: str, data: dict[str, object] | None = None, key: str | None = None) -> dict[str, int]:
        answer = httpx.post(f"{self.url}/events", json={"type": type_, "key": key, "data": data or {}}, timeout=10)
        assert answer.status_code == 201, answer.text
        receipt: dict[str, int] = answer.json()
        return receipt

    def stop(self) -> int:
        """SIGINT, as Ctrl+C would: uvicorn shuts down and the lifespan closes the producer."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout=20)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def service(tmp_path: pathlib.Path) -> Iterator[Service]:
    stream = os.fspath(tmp_path / "events")
    port = free_port()
    log = tmp_path / "service.log"
    with open(log, "wb") as output:
        process = subprocess.Popen(
            [sys.executable, os.fspath(SERVICE), "--stream", stream, "--port", str(port)],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    # uvicorn says so in its log once the lifespan (the producer) is open and the port listens.
    wait_for(
        lambda: b"Uvicorn running on" in log.read_bytes(),
        "the service to listen",
        [os.fspath(tmp_path)],
        processes=[process],
        timeout=30,
    )
    assert httpx.get(f"{url}/stats", timeout=10).status_code == 200
    running = Service(stream, process, url)
    try:
        yield running
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        print(log.read_text())  # shown by pytest when the test failed


def read_events(response: httpx.Response, count: int) -> list[tuple[str, dict[str, object]]]:
    """The first ``count`` server-sent events of a streaming response, as (id, data)."""
    events: list[tuple[str, dict[str, object]]] = []
    event_id = ""
    for line in response.iter_lines():
        if line.startswith("id: "):
            event_id = line[4:]
        elif line.startswith("data: "):
            events.append((event_id, json.loads(line[6:])))
            if len(events) == count:
                break
    return events


def test_post_event_returns_its_partition_and_offset(service: Service) -> None:
    """POST /events answers 201 with where the event was stored; one key keeps one partition, in order."""
    first = service.post("signup", {"plan": "pro"}, key="customer-42")
    second = service.post("upgrade", {"plan": "team"}, key="customer-42")
    assert second["partition"] == first["partition"]
    assert second["offset"] == first["offset"] + 1
    stored = adiskq.read(service.stream, first["partition"], first["offset"])
    assert json.loads(stored.value) == {"type": "signup", "key": "customer-42", "data": {"plan": "pro"}}
    assert stored.headers["type"] == b"signup"


def test_health_reports_the_processor_groups_lag(service: Service) -> None:
    """GET /health is 200 with the processing group's lag once it has handled every posted event,
    and 503 while more than ?max_lag= are left."""
    for n in range(5):
        service.post("signup", {"n": n}, key=f"customer-{n}")

    def caught_up() -> bool:
        answer = httpx.get(f"{service.url}/health?max_lag=0", timeout=10)
        return answer.status_code == 200 and answer.json()["processed"] == {"signup": 5}

    wait_for(caught_up, "the processor group to handle the events", [service.stream], processes=[service.process])
    health = httpx.get(f"{service.url}/health?max_lag=0", timeout=10).json()
    assert health["status"] == "ok"
    assert set(health["lag"]) == {"0", "1", "2"}
    assert sum(health["lag"].values()) == 0
    # The stream's stored commits say the same to a script (the group stores them every second).
    wait_for(
        lambda: (
            sum(adiskq.lag(service.stream, "processor").values()) == 0
            and len(adiskq.lag(service.stream, "processor")) == 3
        ),
        "the processor's commits stored",
        [service.stream],
        processes=[service.process],
    )


def test_health_is_503_while_the_processor_is_behind(service: Service) -> None:
    """While the processor group has more than ?max_lag= events left, /health answers 503."""
    service.post("warm-up", key="customer-1")

    async def ask_while_held() -> httpx.Response:
        # An exclusive member of the group, here, takes every partition from the service's member
        # and commits nothing: the group's lag then grows with each event posted.
        async with (
            adiskq.ConsumerGroup(service.stream, "processor", exclusive=True) as holder,
            anyio.create_task_group() as tasks,
        ):

            async def read() -> None:  # a member takes partitions while it is read
                async for _ in holder:
                    pass

            tasks.start_soon(read)
            with anyio.fail_after(20):
                async for assignment in holder.assignments():
                    if assignment == (0, 1, 2):
                        break
                for n in range(5):
                    await anyio.to_thread.run_sync(lambda n=n: service.post("signup", {"n": n}, key="customer-1"))
                answer = await anyio.to_thread.run_sync(
                    lambda: httpx.get(f"{service.url}/health?max_lag=2", timeout=10)
                )
            tasks.cancel_scope.cancel()
        return answer

    answer = anyio.run(ask_while_held)
    assert answer.status_code == 503, answer.text
    assert answer.json()["status"] == "lagging"
    assert sum(answer.json()["lag"].values()) >= 5


def test_post_event_without_a_type_is_refused(service: Service) -> None:
    """An event without a type gets 422 and nothing is stored."""
    answer = httpx.post(f"{service.url}/events", json={"data": {}}, timeout=10)
    assert answer.status_code == 422
    assert all(p.next_offset == 0 for p in adiskq.stats(service.stream).partitions)


def test_stream_sends_posted_events_as_server_sent_events(service: Service) -> None:
    """GET /events/stream sends every posted event, with id partition-offset and JSON data."""
    receipts = [service.post("tick", {"n": n}, key="clock") for n in range(3)]
    with httpx.stream("GET", f"{service.url}/events/stream", timeout=10) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = read_events(response, 3)
    assert [event_id for event_id, _ in events] == [f"{r['partition']}-{r['offset']}" for r in receipts]
    assert [data["data"] for _, data in events] == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert all(data["type"] == "tick" and data["key"] == "clock" for _, data in events)


def test_stream_delivers_events_posted_while_connected(service: Service) -> None:
    """A connected client receives an event posted after it connected."""
    with httpx.stream("GET", f"{service.url}/events/stream?start=newest", timeout=10) as response:
        lines = response.iter_lines()
        assert next(lines).startswith("retry:")  # the stream is open and the group is starting
        receipt = service.post("late", {"ok": True})
        event_id = next(line for line in lines if line.startswith("id: "))
    assert event_id == f"id: {receipt['partition']}-{receipt['offset']}"


def test_named_group_resumes_after_the_client_reconnects(service: Service) -> None:
    """?group=NAME commits what it sent: reconnecting with that name starts after it."""
    for n in range(2):
        service.post("step", {"n": n}, key="k")
    with httpx.stream("GET", f"{service.url}/events/stream?group=web", timeout=10) as response:
        assert [data["data"] for _, data in read_events(response, 2)] == [{"n": 0}, {"n": 1}]
    # The group stores its commits when it closes, after the disconnect.
    wait_for(
        lambda: sum(adiskq.stats(service.stream).groups.get("web", {}).values()) >= 2,
        "the group's commits stored after the client left",
        [os.path.join(service.stream, "groups", "web")],
        processes=[service.process],
        timeout=15,
    )
    service.post("step", {"n": 2}, key="k")
    with httpx.stream("GET", f"{service.url}/events/stream?group=web", timeout=10) as response:
        assert [data["data"] for _, data in read_events(response, 1)] == [{"n": 2}]


def test_page_shows_the_live_stream_in_headless_chromium(service: Service, tmp_path: pathlib.Path) -> None:
    """The HTML page lists events already there, then new ones live, including one pushed from its own form."""
    service.post("signup", {"plan": "pro"}, key="customer-1")
    with Chromium(tmp_path / "profile") as browser:
        browser.open(f"{service.url}/")
        browser.wait_for("document.getElementById('status').textContent === 'live'")
        browser.wait_for("document.querySelectorAll('#events li').length === 1")
        service.post("upgrade", {"plan": "team"}, key="customer-1")
        browser.wait_for("document.querySelectorAll('#events li').length === 2")
        newest = browser.evaluate("document.querySelector('#events li').textContent")
        assert "upgrade" in newest
        assert '"plan":"team"' in newest
        browser.evaluate("document.querySelector('#send button').click()")
        browser.wait_for("document.querySelectorAll('#events li').length === 3")
        assert "hello from the browser" in browser.evaluate("document.querySelector('#events li').textContent")
        assert browser.evaluate("document.getElementById('count').textContent") == "3"
        browser.screenshot(tmp_path / "page.png")
    assert (tmp_path / "page.png").stat().st_size > 0


def test_service_shuts_down_cleanly_with_a_client_connected(service: Service) -> None:
    """Ctrl+C with a client still streaming: the server exits 0 and the producer released the stream."""
    service.post("bye")
    with httpx.stream("GET", f"{service.url}/events/stream", timeout=10) as response:
        read_events(response, 1)
        assert service.stop() == 0
    assert adiskq.stats(service.stream).owner is None
