"""The ``adiskq`` command group: global options, the commands, and the error boundary around them.

Only click is imported to build the group; adiskq's engine and rich are imported by a command when
it runs, so ``adiskq --help`` starts in a few tens of milliseconds.
"""

from __future__ import annotations

import os
from typing import Any

import click

from .._sansio import core as _core
from . import check, find, groups, kafka_user, mirror, read, retries, serve, stats, upgrade, vacuum, write
from .errors import EXIT_INTERRUPTED, failure_for, internal_error, pacify_stdout, unwrap

__all__ = ["cli", "main"]

_CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class _Boundary(click.Group):
    """A group that turns every failure of its commands into one line and an exit status."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.Abort, click.ClickException):
            raise
        except BaseException as raw:  # the boundary: everything below is translated here
            error = unwrap(raw)
            if isinstance(error, BrokenPipeError):
                pacify_stdout()
                raise click.exceptions.Exit(0) from None
            if isinstance(error, KeyboardInterrupt):
                raise click.exceptions.Exit(EXIT_INTERRUPTED) from None
            if isinstance(error, SystemExit | click.exceptions.Exit | click.ClickException | click.Abort):
                raise error from None
            if ctx.params.get("debug") or os.environ.get("ADISKQ_DEBUG"):
                raise
            if not isinstance(error, Exception):
                raise
            raise (failure_for(error) or internal_error(error)) from None


@click.group(cls=_Boundary, context_settings=_CONTEXT_SETTINGS)
@click.option("--debug", is_flag=True, help="Show the full traceback of an error (also: ADISKQ_DEBUG=1).")
@click.version_option(
    package_name="adiskq",
    prog_name="adiskq",
    message=f"%(prog)s %(version)s ({_core.CORE_DESCRIPTION})",
)
def cli(debug: bool) -> None:
    """adiskq: inspect, read, write and repair adiskq streams (a stream is a folder).

    \b
    Examples:
      adiskq stats orders                      partitions, offsets, owner, groups
      adiskq read orders --follow              print new messages as they arrive
      adiskq find orders --key customer-00     every message with a key, via the key index
      adiskq check orders                      verify every record and index entry

    Exit status: 0 success, 1 error, 2 misuse. Run `adiskq COMMAND --help` for each command.
    """
    if debug:
        import logging

        logging.basicConfig(level=logging.DEBUG, format="%(name)s: %(message)s")


for _command in (
    write.write,
    read.read,
    find.find,
    stats.stats,
    vacuum.vacuum,
    check.check,
    groups.groups,
    groups.offsets,
    upgrade.upgrade,
    serve.serve,
    mirror.mirror,
    retries.retries,
    retries.dead_letters,
):
    cli.add_command(_command)

# The Kafka gateway's SASL users.
cli.add_command(kafka_user.kafka_user)


def main() -> None:
    """The console script ``adiskq`` and ``python -m adiskq``."""
    cli.main()
