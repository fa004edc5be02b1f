"""``adiskq find``: print every message with a key, found through the stream's key index.

It runs ``adiskq.find`` (synchronous, no event loop) and prints in ``adiskq read``'s formats. Only
the key's partition is searched; segments without a usable key index are searched in their data,
with the same answer.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt

import click

from .formats import Format, format_option, open_sink
from .params import _Parsed, parse_time, utf8_text

__all__ = ["find"]


class _TimeType(_Parsed):
    def parse(self, text: str) -> object:
        try:
            return parse_time(text.strip())
        except ValueError:
            raise ValueError(f"{text!r} is not a time: use ISO-8601, such as 2026-01-31T08:00:00Z") from None


TIME = _TimeType("time", "TIME")


@click.command()
@click.argument("path", type=click.Path(path_type=str))
@click.option("--key", "-k", required=True, help="The key to look for (text, as UTF-8).")
@click.option(
    "--base64",
    "key_base64",
    is_flag=True,
    help="Take --key as base64 (as the json format prints keys that are not UTF-8).",
)
@click.option("--since", type=TIME, help="Only messages stamped at or after this ISO-8601 time (UTC unless a zone).")
@click.option("--until", type=TIME, help="Only messages stamped before this time.")
@click.option("--limit", "-n", type=click.IntRange(1), help="Stop after this many (the first in offset order).")
@click.option(
    "--tag", "-t", "tags", multiple=True, metavar="TAG", help="Only messages with this tag (repeat: any of them)."
)
@format_option
def find(
    path: str,
    key: str,
    key_base64: bool,
    since: dt.datetime | None,
    until: dt.datetime | None,
    limit: int | None,
    tags: tuple[str, ...],
    output: Format,
) -> None:
    """Print every message with a key, in offset order.

    A key's messages all live in one partition, and each segment keeps a key index, so this reads a
    few kilobytes per segment, not the stream. The output is that of `adiskq read`.

    \b
    Examples:
      adiskq find orders --key customer-00
      adiskq find orders -k customer-00 --since 2026-01-31T08:00:00Z --limit 10 --format pretty
      adiskq find orders --key /wA= --base64
      adiskq find orders --key customer-00 --tag paid
    """
    import os

    import adiskq

    if key_base64:
        try:
            raw = base64.b64decode(key, validate=True)
        except (binascii.Error, ValueError):
            raise click.BadParameter(f"{key!r} is not base64", param_hint="'--key'") from None
    else:
        try:
            raw = utf8_text(key, "the key").encode("utf-8")
        except ValueError as error:
            raise click.BadParameter(f"{error}, or as --base64", param_hint="'--key'") from None
    from .._sansio.tags import TagFilter

    try:
        TagFilter.of(tags or None)
    except (ValueError, TypeError) as error:
        raise click.BadParameter(str(error), param_hint="'--tag'") from None
    sink = open_sink(output)
    try:
        for message in adiskq.find(os.fspath(path), raw, since=since, until=until, limit=limit, tags=tags or None):
            sink.write(message)
    finally:
        sink.flush()
