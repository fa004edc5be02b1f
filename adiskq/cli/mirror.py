"""``adiskq mirror SRC DST`` and ``adiskq mirror status SRC DST``: a stream to a Kafka topic and back
(``adiskq/kafka/mirror.py``; ``docs/MIRROR.md`` says how it is exact)."""

from __future__ import annotations

import datetime as dt
import json
import signal
from typing import Any

import click

from .errors import Failure
from .params import POSITION

__all__ = ["mirror"]


def _ends(words: tuple[str, ...]) -> tuple[bool, str, str]:
    if len(words) == 3 and words[0] == "status":
        return True, words[1], words[2]
    if len(words) == 2:
        return False, words[0], words[1]
    raise click.UsageError(
        "give SRC and DST (a stream's path and kafka://HOST:PORT[,...]/TOPIC, either way round), or "
        "`status SRC DST`; a stream named 'status' is ./status"
    )


@click.command()
@click.argument("ends", nargs=-1, required=True, metavar="[status] SRC DST")
@click.option(
    "--kafka-config",
    type=click.Path(dir_okay=False, path_type=str),
    help="Kafka client properties (librdkafka's or the Java client's names): SASL, TLS. "
    "Secrets go here, never in the URL.",
)
@click.option(
    "--partitioning",
    type=click.Choice(["preserve", "rehash"]),
    default="preserve",
    show_default=True,
    help="preserve: partition p to partition p; rehash: Kafka's murmur2 of the key (to Kafka only).",
)
@click.option("--create-topic", is_flag=True, help="Create the Kafka topic if it is missing.")
@click.option(
    "--partitions", type=click.IntRange(min=1), help="Partitions of a topic the mirror creates (default: the stream's)."
)
@click.option(
    "--replication-factor",
    type=click.IntRange(min=1),
    help="Replication factor of a topic the mirror creates (default: the cluster's).",
)
@click.option(
    "--from",
    "start",
    type=POSITION,
    default="oldest",
    show_default=True,
    help="Where to begin in partitions the mirror has no position in yet.",
)
@click.option(
    "--on-data-loss",
    type=click.Choice(["fail", "skip"]),
    default="fail",
    show_default=True,
    help="Records removed by retention before they were shipped: stop, or go on from the oldest left.",
)
@click.option("--once", is_flag=True, help="Ship what is there now and stop (default: follow until SIGTERM or Ctrl-C).")
@click.option(
    "--state-topic",
    default="adiskq-mirror-state",
    show_default=True,
    help="The Kafka topic of the mirror's positions (to Kafka).",
)
@click.option(
    "--batch",
    "batch_messages",
    type=click.IntRange(min=1),
    default=10_000,
    show_default=True,
    help="Most messages in one Kafka transaction (or one local write).",
)
@click.option(
    "--progress-every",
    type=click.FloatRange(min=0.1),
    default=5.0,
    show_default=True,
    help="Seconds between progress lines on stderr.",
)
@click.option("--json", "as_json", is_flag=True, help="status: print JSON.")
def mirror(
    ends: tuple[str, ...],
    kafka_config: str | None,
    partitioning: str,
    create_topic: bool,
    partitions: int | None,
    replication_factor: int | None,
    start: Any,
    on_data_loss: str,
    once: bool,
    state_topic: str,
    batch_messages: int,
    progress_every: float,
    as_json: bool,
) -> None:
    """Mirror a stream to a Kafka topic exactly once, or a Kafka topic into a stream.

    To Kafka, each batch is one Kafka transaction together with the mirror's positions (in
    --state-topic), so a mirror killed at any moment and started again ships each message exactly
    once; readers of the topic use isolation.level=read_committed. From Kafka, each record keeps
    its Kafka offset in the header adiskq.kafka.offset, and the stream's last record is where the
    mirror resumes. The first mirror of a stream gives it an identity (in settings.json, which an
    adiskq older than the mirror refuses): that needs the stream closed by its producers once.

    `adiskq mirror status SRC DST` prints each partition's position, lag and the last error.

    \b
    Examples:
      adiskq mirror orders kafka://k1:9092,k2:9092/orders --create-topic --replication-factor 3
      adiskq mirror orders kafka://k1:9092/orders --kafka-config client.properties --once
      adiskq mirror kafka://k1:9092/orders orders-copy --from newest
      adiskq mirror status orders kafka://k1:9092/orders
    """
    is_status, source, target = _ends(ends)
    if is_status:
        _status(source, target, kafka_config, state_topic, as_json)
        return
    import anyio

    from .._errors import InvalidArgumentError
    from ..kafka import Mirror

    if isinstance(start, str) and start not in ("oldest", "newest"):
        raise click.BadParameter(f"{start!r}: use oldest, newest, an offset or a time", param_hint="--from")
    try:
        runner = Mirror(
            source,
            target,
            kafka_config=kafka_config,
            partitioning="rehash" if partitioning == "rehash" else "preserve",
            create_topic=create_topic,
            partitions=partitions,
            replication_factor=-1 if replication_factor is None else replication_factor,
            start=start,
            on_data_loss="skip" if on_data_loss == "skip" else "fail",
            once=once,
            state_topic=state_topic,
            batch_messages=batch_messages,
        )
    except InvalidArgumentError as error:
        raise Failure(str(error)) from None

    def progress(final: bool = False) -> None:
        status = runner.status
        lag = sum(status.lag.values())
        word = "shipped" if final else "shipping:"
        click.echo(
            f"{word} {status.shipped:,} messages from {source} to {target} ({status.rate:,.0f}/s), lag {lag:,}",
            err=True,
        )

    async def run() -> None:
        # SIGTERM and Ctrl-C stop the mirror cleanly from the start (a transaction in flight commits
        # or is aborted by the next start, never half-read): the receiver is set up before anything.
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with anyio.create_task_group() as tasks:

                async def stop_on_signal() -> None:
                    async for _ in signals:
                        tasks.cancel_scope.cancel()
                        return

                async def report() -> None:
                    while True:
                        await anyio.sleep(progress_every)
                        progress()

                tasks.start_soon(stop_on_signal)
                async with runner:
                    positions = ", ".join(f"{p}:{o}" for p, o in sorted(runner.status.positions.items()))
                    click.echo(f"mirroring {source} to {target} from positions {positions}", err=True)
                    tasks.start_soon(report)
                    await runner.run()
                tasks.cancel_scope.cancel()

    anyio.run(run)
    progress(final=True)


def _status(source: str, target: str, kafka_config: str | None, state_topic: str, as_json: bool) -> None:
    from .._extras import needs_extra

    with needs_extra("kafka-cluster", "adiskq's Kafka mirror"):
        from ..kafka._mirror_status import mirror_status

    found = mirror_status(source, target, kafka_config=kafka_config, state_topic=state_topic)
    if as_json:
        click.echo(json.dumps(found, indent=2, sort_keys=True))
        return
    click.echo(f"mirror {source} -> {target}")
    click.echo(f"{'partition':>9}   {'position':>10}   {'end':>10}   {'lag':>10}")
    for partition, row in sorted(found["partitions"].items(), key=lambda item: int(item[0])):
        click.echo(f"{partition:>9}   {row['position']:>10}   {row['end']:>10}   {row['lag']:>10}")
    running = found.get("running")
    if running:
        updated = dt.datetime.fromtimestamp(running["updated"], dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        click.echo(
            f"last report: {updated}, {running['shipped']:,} messages shipped at {running['rate']:,.0f}/s "
            f"(pid {running['pid']})"
        )
    click.echo(f"last error: {found.get('last_error') or 'none'}")
    if found.get("skipped"):
        click.echo(f"skipped (removed before they were shipped): {found['skipped']}")
