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
def upgrade(path: str) -> None:
    """Move a stream to the current format (adiskq/1 to adiskq/2, which adds tags).

    A stream written by an adiskq before tags stays in its format until this moves it: producers
    and consumers of this version read and write it as it is, and only a message with a tag needs
    the move. The records are not rewritten: only settings.json changes.

    An adiskq that knows only the old format and has the stream open would misread the first tagged
    message as damage, so stop every program that reads or writes the stream with an older adiskq
    first. This refuses while a producer or a consumer group member has the stream open; a plain
    Consumer leaves no trace it can see.

    \b
    Examples:
      adiskq upgrade orders
    """
    from .._errors import StreamLockedError
    from .._storage.upgrade import upgrade_stream

    path = os.fspath(path)
    try:
        done = upgrade_stream(path)
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
    if done.before == done.after:
        click.echo(f"{path} is in format {done.after} already: nothing to do")
    else:
        click.echo(f"moved {path} from format {done.before} to {done.after}: its producers may now write tags")
