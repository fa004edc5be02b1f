"""``adiskq upgrade``: move a stream to the current format (``adiskq/_storage/upgrade.py``).

It changes the stream, so it takes the stream's one-writer lock as vacuum does, and refuses while a
producer or a consumer group member has the stream open.
"""

from __future__ import annotations

import os

import click

from .errors import Failure, locked_failure

__all__ = ["upgrade"]


@click.command()
@click.argument("path", type=click.Path(path_type=str))
@click.option(
    "--identity",
    is_flag=True,
    help="Give the stream an identity (format adiskq/4, or kept at adiskq/5), which `adiskq mirror` needs.",
)
def upgrade(path: str, identity: bool) -> None:
    """Move a stream to the current format, adiskq/5 (headers as Kafka has them).

    A stream written by an older adiskq stays in its format until this moves it: producers and
    consumers of this version read and write it as it is, and only what its format cannot hold
    needs the move (a tag on adiskq/1; a null header value or a repeated header name, from a Kafka
    client through the gateway or a producer's Headers, on adiskq/1 to adiskq/4). Compression and
    the identity are kept. The records are not rewritten: only settings.json changes.

    An adiskq that knows only an older format and has the stream open would misread the first
    tagged message or null header value as damage, so stop every program that reads or writes the
    stream with an older adiskq first. This refuses while a producer or a consumer group member has
    the stream open; a plain Consumer leaves no trace it can see.

    --identity gives the stream its identity instead (a random id in settings.json; format adiskq/4,
    or adiskq/5 kept),
    from which `adiskq mirror` derives its Kafka transactional.id. The mirror gives it itself when
    nothing has the stream open; this does it ahead, under the same rules. An adiskq older than
    format 4 refuses the stream afterwards.

    \b
    Examples:
      adiskq upgrade orders
      adiskq upgrade orders --identity
    """
    from .._errors import StreamLockedError
    from .._storage.upgrade import give_identity, upgrade_stream

    path = os.fspath(path)
    try:
        if identity:
            stream_id, done = give_identity(path)
        else:
            stream_id, done = None, upgrade_stream(path)
    except StreamLockedError as error:
        raise locked_failure(
            path,
            error.holder,
            "is open in a producer",
            ", so it cannot be upgraded now: stop every producer of it, and run this again",
        ) from None
    if done.readers:
        members = ", ".join(f"group {name!r}: pid {m.pid} on host {m.host!r}" for name, m in done.readers)
        raise Failure(
            f"stream {path!r} is read by consumer group members now ({members}), so it cannot be upgraded: "
            "stop them (and every other reader of the stream), then run this again"
        )
    if identity and not done.identity_given:
        click.echo(f"{path} has its identity already: {stream_id}")
    elif identity:
        moved = done.after if done.before == done.after else f"{done.before} to {done.after}"
        click.echo(f"gave {path} the identity {stream_id} (format {moved})")
    elif done.before == done.after:
        click.echo(f"{path} is in format {done.after} already: nothing to do")
    else:
        click.echo(
            f"moved {path} from format {done.before} to {done.after}: its producers may now write tags, "
            "null header values and repeated header names"
        )
