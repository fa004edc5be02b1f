"""A FastAPI service on an adiskq stream: ``POST /events`` pushes, ``GET /events/stream`` serves SSE.

    pip install -e '.[examples]'
    python examples/fastapi_service.py --stream /tmp/adiskq-events
    # open http://127.0.0.1:8000/ , or:
    curl -X POST http://127.0.0.1:8000/events -H 'content-type: application/json' \\
         -d '{"type": "signup", "key": "customer-42", "data": {"plan": "pro"}}'
    curl -N http://127.0.0.1:8000/events/stream
    curl http://127.0.0.1:8000/health              # 200 while the processing group keeps up, else 503

    # several worker processes, every one producing (shared producers):
    python examples/fastapi_service.py --stream /tmp/adiskq-events --workers 4
    # or with uvicorn's own command line:
    ADISKQ_STREAM=/tmp/adiskq-events uvicorn fastapi_service:app_from_env --factory --workers 4 --app-dir examples

The producer is opened in the app's lifespan and shared by every request of the process;
concurrent pushes from many requests are batched together by it. With ``--workers N`` (uvicorn
starts N processes) each worker opens its own producer with ``shared=True``: the workers append to
the stream side by side, each to a partition under that partition's lock, and offsets stay
contiguous. Each ``GET /events/stream`` is
a consumer group over all partitions: ``?group=NAME`` makes it a named group whose progress is
committed as each event is sent, so a client that reconnects with the same name resumes where it
stopped; without a name the client sees the stream from ``?start=oldest`` (the default) or
``newest``. Events go out as server-sent events whose ``id`` is ``partition-offset``.

Events are stored as JSON through serializers (``adiskq.serializers.pydantic_json``): the producer
is given ``StoredEvent`` models and every reader gets them back, typed. Beside the requests, each
worker runs a member of the ``processor`` group, the service's own work on every event (here it
counts them by type); ``GET /health`` answers 503 once that group's lag passes ``?max_lag=``.

Every worker also runs a member of the ``billing`` group, which charges each ``order`` event
(``{"type": "order", "data": {"id": 1, "amount": 5}}``): a charge that fails for a while (``"fails":
2`` makes the first two attempts fail) is retried two seconds later, and an order that can never be
charged (a negative amount), or one still failing at its third attempt, goes to the dead-letter
stream ``STREAM.dead-letters``. ``GET /billing`` shows what this worker charged and the dead letters;
``adiskq dead-letters STREAM --group billing --redrive`` hands them back.
"""

from __future__ import annotations

import argparse
import json
import os
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.to_thread
from fastapi import FastAPI, Query, Request, Response
from fastapi.responses import FileResponse, JSONResponse, StreamingResponse
from pydantic import BaseModel, Field

import adiskq
from adiskq.serializers import pydantic_json

PAGE = Path(__file__).with_name("static") / "events.html"
PROCESSOR = "processor"  # the named group doing the service's own work on every event


class Event(BaseModel):
    """What a client posts: a type, an optional key (it picks the partition: same key, same order)."""

    type: str = Field(min_length=1, max_length=100)
    key: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)


class StoredEvent(BaseModel):
    """What the stream holds, as JSON: the event with its key as posted (a message pushed without a
    key gets a random one as its stored key)."""

    type: str
    key: str | None
    data: dict[str, Any]


EVENTS = pydantic_json(StoredEvent)  # value_serializer= / value_deserializer= for every reader


class Receipt(BaseModel):
    partition: int
    offset: int


def as_sse(message: adiskq.Message[bytes, StoredEvent]) -> str:
    """One server-sent event: the id says where the message lives, the data is JSON."""
    event = message.value
    body = {
        "partition": message.partition,
        "offset": message.offset,
        "timestamp": message.timestamp.isoformat(),
        "key": event.key,
        "type": event.type,
        "data": event.data,
    }
    return f"id: {message.partition}-{message.offset}\ndata: {json.dumps(body)}\n\n"


async def process_events(group: adiskq.ConsumerGroup[bytes, StoredEvent], counts: Counter[str]) -> None:
    """The service's own work on every event, by the members of one named group (one per worker
    process): each event is handled once, then committed."""
    async for message in group:
        counts[message.value.type] += 1
        group.commit(message)


class ChargeFailed(Exception):
    """The payment service failed this time (worth trying again later)."""


RETRY_DELAY = 2.0  # seconds before a failed charge is tried again


def charge(order: dict[str, Any], attempt: int) -> None:
    """A stand-in for a payment call: ValueError for an order that can never be charged,
    ChargeFailed for the first ``fails`` attempts."""
    if not isinstance(order.get("amount"), int | float) or order["amount"] <= 0:
        raise ValueError(f"order {order.get('id')!r} has no positive amount")
    if attempt <= order.get("fails", 0):
        raise ChargeFailed(f"payment service unavailable (attempt {attempt})")


async def bill(stream_path: str | os.PathLike[str], dead_letter_path: str, charged: list[dict[str, Any]]) -> None:
    """The ``billing`` group's member in this worker: charge orders, retry failures, dead-letter the hopeless."""
    async with adiskq.ConsumerGroup(
        stream_path,
        name="billing",
        max_attempts=3,
        dead_letter_path=dead_letter_path,
        value_deserializer=EVENTS.deserializer,
    ) as group:
        async for message in group:
            event = message.value
            if event.type != "order":
                group.commit(message)
                continue
            try:
                charge(event.data, message.attempt)
            except ChargeFailed as error:  # back to the group in RETRY_DELAY s; the next orders go on
                await group.retry(message, delay=RETRY_DELAY, reason=str(error))
            except ValueError as error:
                await group.dead_letter(message, reason=str(error))
            else:
                charged.append({"id": event.data.get("id"), "attempt": message.attempt})
                group.commit(message)


def read_dead_letters(path: str) -> list[dict[str, Any]]:
    """The dead letters stored so far (a blocking read: run it in a worker thread)."""
    try:
        partitions = adiskq.stats(path).partitions
    except adiskq.StreamNotFoundError:
        return []
    letters = []
    for part in partitions:
        for offset in range(part.oldest_offset, part.next_offset):
            letter = adiskq.read(path, part.partition, offset)
            letters.append(
                {
                    "order": json.loads(letter.value)["data"],
                    "attempts": letter.attempt,
                    "reason": letter.headers["adiskq-reason"].decode(),
                }
            )
    return letters


def create_app(
    stream_path: str | os.PathLike[str],
    *,
    partitions: int = 3,
    shared: bool = False,
    dead_letter_path: str | None = None,
) -> FastAPI:
    dead_letters = dead_letter_path or f"{os.fspath(stream_path)}.dead-letters"

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # One producer for the process's whole life: opening takes the stream's lock (exclusive, or
        # shared with the other workers' producers), and closing (on shutdown) writes what is
        # pending and fsyncs.
        async with (
            adiskq.Producer(
                stream_path, partitions=partitions, shared=shared, value_serializer=EVENTS.serializer
            ) as producer,
            adiskq.ConsumerGroup(stream_path, PROCESSOR, value_deserializer=EVENTS.deserializer) as processor,
            anyio.create_task_group() as tasks,
        ):
            # The lifespan runs in one task from startup to shutdown, so this task group is left
            # by the task that entered it, as a task group must be.
            app.state.producer = producer
            app.state.processor = processor
            app.state.counts = Counter()
            app.state.charged = []
            tasks.start_soon(process_events, processor, app.state.counts)
            tasks.start_soon(bill, stream_path, dead_letters, app.state.charged)
            yield
            tasks.cancel_scope.cancel()  # shutting down: the groups store their commits as they close

    app = FastAPI(title="adiskq events", lifespan=lifespan)

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(PAGE, media_type="text/html")

    @app.post("/events", status_code=201)
    async def post_event(event: Event, request: Request, response: Response) -> Receipt:
        producer: adiskq.Producer[str, StoredEvent] = request.app.state.producer
        stored = StoredEvent(type=event.type, key=event.key, data=event.data)
        partition, offset = await producer.push(stored, key=event.key, headers={"type": event.type.encode()})
        response.headers["X-Worker-Pid"] = str(os.getpid())  # which worker process wrote it
        return Receipt(partition=partition, offset=offset)

    @app.get("/events/stream")
    async def stream_events(
        group: str | None = Query(None, description="a named group resumes where it stopped"),
        start: Literal["oldest", "newest"] = "oldest",
    ) -> StreamingResponse:
        async def events() -> AsyncIterator[str]:
            yield "retry: 1000\n\n"  # how soon the browser reconnects if the connection drops
            # The client disconnecting cancels this generator, which closes the group.
            async with adiskq.ConsumerGroup(
                stream_path, name=group, start=start, value_deserializer=EVENTS.deserializer
            ) as consumer:
                async for message in consumer:
                    yield as_sse(message)
                    if group is not None:
                        consumer.commit(message)  # sent: a reconnect with this name starts after it

        return StreamingResponse(
            events(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    @app.get("/health")
    async def health(request: Request, max_lag: int = Query(1000, ge=0)) -> JSONResponse:
        """200 while the processor group has at most ``max_lag`` events left, else 503."""
        processor: adiskq.ConsumerGroup[bytes, StoredEvent] = request.app.state.processor
        lag = await processor.lag()  # every partition's events left past the group's commits
        behind = sum(lag.values())
        return JSONResponse(
            {
                "status": "ok" if behind <= max_lag else "lagging",
                "lag": {str(partition): left for partition, left in sorted(lag.items())},
                "processed": dict(request.app.state.counts),  # by this worker process
            },
            status_code=200 if behind <= max_lag else 503,
        )

    @app.get("/billing")
    async def billing_state() -> dict[str, Any]:
        return {
            "charged": list(app.state.charged),  # what this worker charged, and at which attempt
            "dead_letters": await anyio.to_thread.run_sync(read_dead_letters, dead_letters),
        }

    @app.get("/stats")
    async def stream_stats() -> dict[str, Any]:
        stats = await anyio.to_thread.run_sync(adiskq.stats, stream_path)
        return {
            "partitions": [
                {"partition": p.partition, "oldest_offset": p.oldest_offset, "next_offset": p.next_offset}
                for p in stats.partitions
            ],
            "groups": stats.groups,
            "writers": [{"pid": w.pid, "host": w.host, "shared": w.shared} for w in stats.writers],
        }

    return app


def app_from_env() -> FastAPI:
    """The app for ``uvicorn --factory --workers N``: every worker a shared producer of the stream
    named by ``ADISKQ_STREAM``."""
    return create_app(os.environ.get("ADISKQ_STREAM", "./events-stream"), shared=True)


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stream", default="./events-stream", help="the stream's folder (created if missing)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--workers", type=int, default=1, help="worker processes, each a shared producer")
    args = parser.parse_args()
    # 127.0.0.1 only: this example has no authentication. An open event stream would hold a
    # graceful shutdown forever, so shutdown closes connections after a second.
    if args.workers == 1:
        uvicorn.run(create_app(args.stream), host="127.0.0.1", port=args.port, timeout_graceful_shutdown=1)
        return
    os.environ["ADISKQ_STREAM"] = os.path.abspath(args.stream)  # the workers are new processes
    uvicorn.run(
        "fastapi_service:app_from_env",
        factory=True,
        app_dir=os.path.dirname(os.path.abspath(__file__)),
        workers=args.workers,
        host="127.0.0.1",
        port=args.port,
        timeout_graceful_shutdown=1,
    )


if __name__ == "__main__":
    main()
