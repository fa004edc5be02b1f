"""``adiskq serve ROOT --kafka HOST:PORT``: serve the streams under ROOT to Kafka clients."""

from __future__ import annotations

import logging
import signal
import sys
from typing import Any

import click

from .errors import Failure, unwrap
from .serve_options import gateway_options, group_and_security_options

__all__ = ["serve"]


@click.command()
@click.argument("root", type=click.Path(file_okay=False, dir_okay=True))
@click.option(
    "--kafka",
    "kafka_address",
    default="127.0.0.1:9092",
    show_default=True,
    metavar="HOST:PORT",
    help="Where to listen for Kafka clients (port 0: any free port).",
)
@click.option(
    "--partitions",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Partitions of a topic created on first use (Kafka's num.partitions).",
)
@click.option(
    "--flush",
    type=click.Choice(["async", "sync"]),
    default="async",
    show_default=True,
    help="Flush mode of the streams the gateway writes; sync: a produce is answered once it is on disk.",
)
@click.option("--no-auto-create", is_flag=True, help="Refuse topics that do not exist instead of creating them.")
@click.option("--shared", is_flag=True, help="Write streams as a shared producer, beside other processes' producers.")
@click.option(
    "--advertise",
    metavar="HOST:PORT",
    default=None,
    help="The address Metadata gives clients, when it differs from the bound one.",
)
@click.option(
    "--max-request-bytes",
    type=click.IntRange(min=64),
    default=100 * 2**20,
    show_default=True,
    help="A larger request is refused before it is read (Kafka's socket.request.max.bytes).",
)
@click.option(
    "--max-connections-per-ip",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Close a client address's connections beyond N at once (Kafka's max.connections.per.ip); no limit by default.",
)
@group_and_security_options
def serve(
    root: str,
    kafka_address: str,
    partitions: int,
    flush: str,
    no_auto_create: bool,
    shared: bool,
    advertise: str | None,
    max_request_bytes: int,
    max_connections_per_ip: int | None,
    **group_and_security: Any,
) -> None:
    """Serve every stream folder directly under ROOT as a Kafka topic of the same name.

    \b
    Examples:
      adiskq serve /var/lib/app/streams                  Kafka clients at 127.0.0.1:9092
      kcat -b 127.0.0.1:9092 -L                          list the topics
      adiskq serve streams --kafka 0.0.0.0:9092 --advertise host.example:9092 --flush sync

    SIGTERM or SIGINT (Ctrl-C) stops it: the requests in flight finish, every stream is closed
    cleanly, and it exits 0.
    """
    import anyio

    from .._errors import InvalidArgumentError
    from ..kafka import KafkaGateway
    from ..kafka._server import parse_host_port

    try:
        host, port = parse_host_port(kafka_address, what="--kafka")
    except InvalidArgumentError as error:
        raise click.BadParameter(str(error), param_hint="--kafka") from None
    try:
        gateway = KafkaGateway(
            root,
            host=host,
            port=port,
            partitions=partitions,
            flush="sync" if flush == "sync" else "async",
            auto_create=not no_auto_create,
            shared=shared,
            advertise=advertise,
            max_request_bytes=max_request_bytes,
            max_connections_per_ip=max_connections_per_ip,
            **gateway_options(group_and_security),
        )
    except InvalidArgumentError as error:
        raise Failure(str(error)) from None
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    kafka_logger = logging.getLogger("adiskq.kafka")
    kafka_logger.addHandler(handler)
    kafka_logger.setLevel(logging.INFO)

    async def run() -> None:
        async with anyio.create_task_group() as task_group:
            await task_group.start(gateway.serve)
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    break
            await gateway.aclose()

    try:
        anyio.run(run)
    except BaseException as raw:
        cause = unwrap(raw)
        if isinstance(cause, OSError) and gateway.port_or_none is None:
            raise Failure(f"cannot listen on {kafka_address}: {cause.strerror or cause}") from None
        raise
