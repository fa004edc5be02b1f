"""``Mirror``: a stream shipped to a Kafka topic exactly once, or a topic copied into a stream.

    async with Mirror("orders", "kafka://k1:9092,k2:9092/orders", kafka_config="client.properties") as mirror:
        await mirror.run()                      # follows the stream until cancelled; once=True stops at its end

Which way it goes is told by which end is a ``kafka://`` URL. Local → Kafka is ``_mirror_ship.py``,
Kafka → local ``_mirror_fetch.py``; ``docs/MIRROR.md`` says why each is exact across crashes and what
does not map. On asyncio and Trio: the Kafka client (confluent-kafka) is called in worker threads.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from types import TracebackType
from typing import Literal, Self

from .._errors import ClosedError, InvalidArgumentError
from ._mirror_config import is_kafka_url, parse_kafka_url, read_client_config
from ._mirror_fetch import Fetcher
from ._mirror_options import DEFAULT_STATE_TOPIC, From, MirrorOptions, MirrorStatus
from ._mirror_ship import Shipper

__all__ = ["Mirror"]


class Mirror:
    """A mirror between a local stream and a Kafka topic (``kafka://HOST:PORT[,...]/TOPIC``), either way.

    ``kafka_config``: the Kafka client's configuration (librdkafka's names), as a mapping or the path
    of a properties file: SASL, TLS. ``partitioning``: ``"preserve"`` (partition p to partition p) or
    ``"rehash"`` (to Kafka only: Kafka's murmur2 of the key). ``create_topic``: create a missing
    topic, with ``partitions`` (the stream's count by default) and ``replication_factor`` (the
    cluster's default). ``start``: where to begin in each partition the mirror has no position in
    (``"oldest"``, ``"newest"``, an offset, an aware datetime). ``on_data_loss``: ``"fail"`` or
    ``"skip"`` records retention removed before they were shipped. ``once``: stop at the end of what
    is there when the mirror starts, instead of following.
    """

    def __init__(
        self,
        source: str | os.PathLike[str],
        target: str | os.PathLike[str],
        *,
        kafka_config: Mapping[str, str] | str | os.PathLike[str] | None = None,
        partitioning: Literal["preserve", "rehash"] = "preserve",
        create_topic: bool = False,
        partitions: int | None = None,
        replication_factor: int = -1,
        start: From = "oldest",
        on_data_loss: Literal["fail", "skip"] = "fail",
        once: bool = False,
        state_topic: str = DEFAULT_STATE_TOPIC,
        batch_messages: int = 10_000,
    ) -> None:
        source_text, target_text = os.fspath(source), os.fspath(target)
        if is_kafka_url(source_text) == is_kafka_url(target_text):
            raise InvalidArgumentError(
                f"mirror {source_text!r} to {target_text!r}: exactly one end must be a Kafka topic "
                "(kafka://HOST:PORT[,HOST:PORT...]/TOPIC) and the other a stream's path"
            )
        if kafka_config is None:
            config: Mapping[str, str] = {}
        elif isinstance(kafka_config, Mapping):
            config = {str(key): str(value) for key, value in kafka_config.items()}
        else:
            config = read_client_config(kafka_config)
        options = MirrorOptions(
            kafka_config=config,
            partitioning=partitioning,
            create_topic=create_topic,
            partitions=partitions,
            replication_factor=replication_factor,
            start=start,
            on_data_loss=on_data_loss,
            once=once,
            state_topic=state_topic,
            batch_messages=batch_messages,
        )
        self._runner: Shipper | Fetcher
        if is_kafka_url(target_text):
            self._runner = Shipper(os.path.abspath(source_text), parse_kafka_url(target_text), options)
        else:
            self._runner = Fetcher(parse_kafka_url(source_text), os.path.abspath(target_text), options)
        self._state: Literal["new", "open", "closed"] = "new"

    @property
    def status(self) -> MirrorStatus:
        """Positions, the source's ends, messages shipped, the rate, the last error, gaps skipped."""
        return self._runner.status

    async def __aenter__(self) -> Self:
        if self._state != "new":
            raise ClosedError("a Mirror is opened once: make a new one")
        self._state = "open"
        try:
            await self._runner.open()
        except BaseException:
            await self.aclose()
            raise
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.aclose()

    async def run(self) -> None:
        """Ship until cancelled; with ``once=True``, until the end of what was there at the start."""
        if self._state != "open":
            raise ClosedError("run() needs the Mirror open: use `async with Mirror(...) as mirror`")
        await self._runner.run()

    async def aclose(self) -> None:
        if self._state == "closed":
            return
        self._state = "closed"
        import anyio

        with anyio.CancelScope(shield=True):
            await self._runner.close()
