"""``adiskq write``: append messages from stdin or a file, one per line or length-delimited."""

from __future__ import annotations

import contextlib
import json
import os
import struct
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import TYPE_CHECKING, Final

import click

from .._sansio.retention import DEFAULT_REFUSE_WRITES_ABOVE
from .errors import Failure
from .output import format_count, progress_bar
from .params import HEADER, utf8_text

if TYPE_CHECKING:
    from aiofiles.threadpool.binary import AsyncBufferedReader, AsyncIndirectBufferedIOBase

    from .._sansio.values import Receipt, Record

__all__ = ["write"]

_READ_BYTES: Final = 256 * 1024
# push_many takes at most this many messages at a time: enough that a batch costs a few system
# calls per partition, few enough that a batch is encoded without holding the loop for long.
_BATCH_MESSAGES: Final = 1000
_LENGTH: Final = struct.Struct("<I")


class BadInput(Exception):
    """Input that is not a message: the messages before it are written, then the command fails."""


async def read_chunks(
    source: AsyncBufferedReader | AsyncIndirectBufferedIOBase, on_read: Callable[[int], None]
) -> AsyncGenerator[bytes, None]:
    """The input in chunks as they arrive (``read1``: a pipe's data is taken as soon as it comes)."""
    while chunk := await source.read1(_READ_BYTES):
        on_read(len(chunk))
        yield chunk


async def split_lines(chunks: AsyncIterator[bytes]) -> AsyncGenerator[list[bytes], None]:
    """The lines each chunk completes; the newline is not part of a message; a last line without one counts."""
    rest = b""
    async for chunk in chunks:
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        if lines:
            yield lines
    if rest:
        yield [rest]


async def split_frames(chunks: AsyncIterator[bytes]) -> AsyncGenerator[list[bytes], None]:
    """The length-delimited messages each chunk completes: a u32 little-endian length, then the bytes."""
    buffer = bytearray()
    position = 0  # where the current frame starts, counted from the start of the input
    async for chunk in chunks:
        buffer += chunk
        start = 0
        frames = []
        while len(buffer) - start >= _LENGTH.size:
            (size,) = _LENGTH.unpack_from(buffer, start)
            end = start + _LENGTH.size + size
            if end > len(buffer):
                break
            frames.append(bytes(buffer[start + _LENGTH.size : end]))
            position += end - start
            start = end
        del buffer[:start]
        if frames:
            yield frames
    if buffer:
        raise BadInput(
            f"the input ends inside a message at byte {position} ({len(buffer)} bytes of a frame): "
            "with --binary each message is a 4-byte little-endian length followed by that many bytes"
        )


def key_from_field(value: bytes, field: str, number: int, binary: bool) -> str:
    """The key of a JSON message: its ``field``, as text (numbers and other values as JSON)."""
    where = f"message {number} ({'frame' if binary else 'line'} {number})"
    try:
        document = json.loads(value)
    except ValueError:
        raise BadInput(f"{where} is not JSON, so --key-field {field!r} cannot be read from it") from None
    if not isinstance(document, dict) or field not in document:
        raise BadInput(f"{where} is not a JSON object with a {field!r} field")
    key = document[field]
    if key is None:
        raise BadInput(f"{where} has {field!r}: null, which is no key: give every message a {field!r} value")
    if not isinstance(key, str):
        return json.dumps(key, sort_keys=True)  # escapes what is not ASCII: always UTF-8
    try:
        return utf8_text(key, f"its --key-field {field!r} value")
    except ValueError as error:
        raise BadInput(f"{where}: {error} (a JSON \\u escape of a lone surrogate)") from None


class Tally:
    """How many messages went to each partition, and the offsets they got."""

    def __init__(self) -> None:
        self.count = 0
        self.first: dict[int, int] = {}
        self.last: dict[int, int] = {}
        self.counts: dict[int, int] = {}

    def add(self, receipts: list[Receipt]) -> None:
        self.count += len(receipts)
        for partition, offset in receipts:
            self.first.setdefault(partition, offset)
            self.last[partition] = offset
            self.counts[partition] = self.counts.get(partition, 0) + 1

    def _offsets(self, partition: int) -> str:
        first, last, count = self.first[partition], self.last[partition], self.counts[partition]
        if first == last:
            return f"partition {partition} offset {first}"
        if last - first + 1 == count:
            return f"partition {partition} offsets {first}..{last}"
        # Shared writers append side by side: this run's offsets are not one run of numbers.
        return f"partition {partition}: {format_count(count)} offsets from {first} to {last}, between other writers'"

    def describe(self, path: str) -> str:
        if not self.count:
            return f"wrote no messages to {path} (the input was empty)"
        parts = ", ".join(self._offsets(p) for p in sorted(self.first))
        noun = "message" if self.count == 1 else "messages"
        return f"wrote {format_count(self.count)} {noun} to {path}: {parts}"


async def write_messages(
    path: str,
    source: str,
    *,
    key: str | None,
    key_field: str | None,
    headers: dict[str, bytes],
    partitions: int | None,
    binary: bool,
    tag: str | None = None,
    sync: bool,
    lock_timeout: float,
    on_read: Callable[[int], None],
    tally: Tally,
    refuse_writes_above: float = DEFAULT_REFUSE_WRITES_ABOVE,
    shared: bool = False,
    compression: str | None = None,
) -> None:
    """Push every message of the input, in batches, through one producer."""
    import aiofiles

    import adiskq

    async with contextlib.AsyncExitStack() as stack:
        producer = await stack.enter_async_context(
            adiskq.Producer(
                path,
                partitions=partitions,
                flush="sync" if sync else "async",
                lock_timeout=lock_timeout,
                refuse_writes_above=refuse_writes_above,
                shared=shared,
                compression="zstd" if compression == "zstd" else None,
            )
        )
        reader = aiofiles.stdin_bytes if source == "-" else await stack.enter_async_context(aiofiles.open(source, "rb"))
        chunks = read_chunks(reader, on_read)
        messages = await stack.enter_async_context(
            contextlib.aclosing(split_frames(chunks) if binary else split_lines(chunks))
        )
        # What one read of the input completes is pushed at once (in slices of at most
        # _BATCH_MESSAGES): a file goes in large batches, a slow pipe (`tail -f log |`) line by line.
        batch: list[Record] = []
        number = 0
        try:
            async for values in messages:
                for value in values:
                    number += 1
                    message_key = key if key_field is None else key_from_field(value, key_field, number, binary)
                    batch.append(adiskq.Record(value, key=message_key, headers=headers or None, tag=tag))
                    if len(batch) >= _BATCH_MESSAGES:
                        tally.add(await producer.push_many(batch))
                        batch = []
                if batch:
                    tally.add(await producer.push_many(batch))
                    batch = []
        except BadInput as error:
            if batch:
                tally.add(await producer.push_many(batch))
            raise Failure(
                f"{error}; the {format_count(tally.count)} messages before it were written, nothing after it"
            ) from None
        except adiskq.DiskUsageRefusedError as error:
            raise Failure(
                f"writes to {path} are refused: its file system is {error.usage:.1%} full, above "
                f"--refuse-writes-above {error.level:g}. The {format_count(tally.count)} messages before were "
                "written, nothing after. Free space, delete old data with `adiskq vacuum PATH --max-disk-usage "
                "0.85` (or --max-bytes/--max-age), or pass a higher --refuse-writes-above (1 turns the check off)"
            ) from None


@click.command()
@click.argument("path", type=click.Path(path_type=str))
@click.argument("source", metavar="[FILE]", default="-", type=click.Path(dir_okay=False, allow_dash=True, exists=True))
@click.option("--key", "-k", help="Give every message this key (it picks the partition). Default: a random key.")
@click.option("--key-field", metavar="FIELD", help="Each message is a JSON object: take its key from FIELD.")
@click.option("--header", "-H", "headers", multiple=True, type=HEADER, help="Add this header to every message.")
@click.option("--tag", "-t", help="Give every message this tag (what `read --tag` and tag-filtered consumers select).")
@click.option(
    "--partitions",
    "-p",
    type=click.IntRange(1, 999_999),
    help="Partitions of a new stream (default 1); on an existing stream, more partitions are added.",
)
@click.option(
    "--binary",
    is_flag=True,
    help="Length-delimited input: each message is a 4-byte little-endian length, then its bytes.",
)
@click.option(
    "--flush",
    type=click.Choice(["async", "sync"]),
    default="async",
    show_default=True,
    help="async: handed to the OS per batch, fsynced on close; sync: fsynced per batch.",
)
@click.option("--lock-timeout", type=click.FloatRange(0), default=0, help="Wait this many seconds for a busy stream.")
@click.option(
    "--refuse-writes-above",
    type=click.FloatRange(0, 1, min_open=True),
    default=DEFAULT_REFUSE_WRITES_ABOVE,
    show_default=True,
    help="Fail instead of writing while the stream's file system is fuller than this fraction (1: never).",
)
@click.option(
    "--shared",
    is_flag=True,
    help="Write beside other shared producers (a service's, other `write --shared` runs) instead of alone.",
)
@click.option(
    "--compression",
    type=click.Choice(["zstd"]),
    help="Create the stream compressed: values stored with a zstd dictionary it keeps (see the README).",
)
@click.option("--progress/--no-progress", default=None, help="Show a progress bar (default: for a FILE on a terminal).")
def write(
    path: str,
    source: str,
    key: str | None,
    key_field: str | None,
    headers: tuple[tuple[str, bytes], ...],
    tag: str | None,
    partitions: int | None,
    binary: bool,
    flush: str,
    lock_timeout: float,
    refuse_writes_above: float,
    shared: bool,
    compression: str | None,
    progress: bool | None,
) -> None:
    """Append messages to a stream, one per line, from FILE or stdin.

    Each line (without its newline) is one message's value. The stream is created if PATH is a
    missing or empty folder. Says how many messages were written, and the offsets they got.

    \b
    Examples:
      printf 'hello\\nworld\\n' | adiskq write orders
      adiskq write orders orders.jsonl --key-field customer --partitions 3
      adiskq write orders --key customer-00 -H type=created < orders.txt
      adiskq write orders --tag created < created.txt
      adiskq write orders --shared < more.txt     # beside a service's shared producers
      adiskq write events events.jsonl --compression zstd
    """
    import anyio

    from .._sansio.codec import tag_bytes

    if key is not None and key_field is not None:
        raise click.UsageError("give --key (one key for all) or --key-field (a key per message), not both")
    if key is not None:
        try:
            utf8_text(key, "the key")
        except ValueError as error:
            raise click.BadParameter(str(error), param_hint="'--key'") from None
    if tag is not None:
        try:
            tag_bytes(tag)
        except ValueError as error:
            raise click.BadParameter(str(error), param_hint="'--tag'") from None
    tally = Tally()
    show_progress = source != "-" if progress is None else progress
    total = os.path.getsize(source) if source != "-" and os.path.isfile(source) else None
    bar = progress_bar("writing", total=total or 0) if show_progress and total else None

    def on_read(size: int) -> None:
        if bar is not None:
            bar.advance(bar.task_ids[0], size)

    try:
        if bar is not None:
            bar.start()
        anyio.run(
            lambda: write_messages(
                path,
                source,
                key=key,
                key_field=key_field,
                headers=dict(headers),
                partitions=partitions,
                binary=binary,
                tag=tag,
                sync=flush == "sync",
                lock_timeout=lock_timeout,
                on_read=on_read,
                tally=tally,
                refuse_writes_above=refuse_writes_above,
                shared=shared,
                compression=compression,
            )
        )
    finally:
        if bar is not None:
            bar.stop()
    click.echo(tally.describe(path))
