"""How ``adiskq read`` prints messages: ``json`` lines, raw ``value`` lines, or ``pretty`` for people.

``json`` is one object per line: partition, offset, timestamp (ISO-8601, UTC, to the nanosecond),
key, value and headers. Bytes that are not UTF-8 are given as base64, and a field says so:
``"key_encoding": "base64"``, ``"value_encoding": "base64"``, or ``"headers_encoding": {"name":
"base64"}`` for the headers concerned, and ``"tag"`` for a message that has one. A message whose
headers hold a null value or a repeated name (Kafka's, format ``adiskq/5``) also has
``"header_list"``: every header in order as ``[name, value]``, the value null for Kafka's null, or
``[name, base64, "base64"]``; ``"headers"`` then holds each name's last value. The fields
appear only when needed. ``pretty`` shows the tag beside the key; ``value`` prints values alone.
"""

from __future__ import annotations

import base64
import json.encoder
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, BinaryIO, Final, Literal, TypeAlias

import click

from .._sansio.values import Headers
from .output import console, format_time, iso_time

if TYPE_CHECKING:
    from .._sansio.values import Message

__all__ = ["FORMATS", "Format", "MessageSink", "format_option", "json_line", "message_json", "open_sink"]

Format: TypeAlias = Literal["json", "value", "pretty"]
FORMATS: Final[tuple[Format, ...]] = ("json", "value", "pretty")

# The --format option of every command that prints messages (read, find).
format_option: Final = click.option(
    "--format",
    "-o",
    "output",
    type=click.Choice(FORMATS),
    default="json",
    show_default=True,
    help="json: one object per line; value: raw values, one per line; pretty: for people.",
)
_PREVIEW_BYTES: Final = 48
# JSON string literal of a str, non-ASCII kept as is (the C encoder behind json.dumps(ensure_ascii=False)).
_quote: Final = json.encoder.encode_basestring
_WRITE_BYTES: Final = 64 * 1024


def _text(raw: bytes) -> tuple[str, bool]:
    """The bytes as text, or as base64 (True) when they are not UTF-8."""
    try:
        return raw.decode("utf-8"), False
    except UnicodeDecodeError:
        return base64.b64encode(raw).decode("ascii"), True


def _header_list(headers: Headers) -> list[list[str | None]]:
    """``"header_list"``: each header as [name, text], [name, null] or [name, base64, "base64"]."""
    listed: list[list[str | None]] = []
    for name, raw in headers.all():
        if raw is None:
            listed.append([name, None])
            continue
        text, is_b64 = _text(raw)
        listed.append([name, text, "base64"] if is_b64 else [name, text])
    return listed


def message_json(message: Message) -> dict[str, object]:
    """One message as a JSON object (see the module's docstring)."""
    key, key_b64 = _text(message.key)
    value, value_b64 = _text(message.value)
    document: dict[str, object] = {
        "partition": message.partition,
        "offset": message.offset,
        "timestamp": iso_time(message.timestamp_ns),
        "key": key,
        "value": value,
    }
    headers: dict[str, str] = {}
    encoded: dict[str, str] = {}
    for name, raw in message.headers.items():
        headers[name], is_b64 = _text(raw)
        if is_b64:
            encoded[name] = "base64"
    document["headers"] = headers
    if message.tag is not None:
        document["tag"] = message.tag
    if key_b64:
        document["key_encoding"] = "base64"
    if value_b64:
        document["value_encoding"] = "base64"
    if encoded:
        document["headers_encoding"] = encoded
    if type(message.headers) is Headers and message.headers.kafka_only:
        document["header_list"] = _header_list(message.headers)
    return document


def json_line(message: Message) -> bytes:
    """``message_json`` as one line of UTF-8 JSON, built directly (faster than json.dumps: see
    benchmarks/RESULTS.md, section "Figures the code relies on", F18)."""
    key, key_b64 = _text(message.key)
    value, value_b64 = _text(message.value)
    parts = [
        f'{{"partition": {message.partition}, "offset": {message.offset}, '
        f'"timestamp": "{iso_time(message.timestamp_ns)}", "key": {_quote(key)}, "value": {_quote(value)}, '
    ]
    encoded = []
    if message.headers:
        fields = []
        for name, raw in message.headers.items():
            text, is_b64 = _text(raw)
            fields.append(f"{_quote(name)}: {_quote(text)}")
            if is_b64:
                encoded.append(f'{_quote(name)}: "base64"')
        parts.append('"headers": {' + ", ".join(fields) + "}")
    else:
        parts.append('"headers": {}')
    if message.tag is not None:
        parts.append(f', "tag": {_quote(message.tag)}')
    if key_b64:
        parts.append(', "key_encoding": "base64"')
    if value_b64:
        parts.append(', "value_encoding": "base64"')
    if encoded:
        parts.append(', "headers_encoding": {' + ", ".join(encoded) + "}")
    if type(message.headers) is Headers and message.headers.kafka_only:
        listed = (
            "[" + ", ".join("null" if item is None else _quote(item) for item in header) + "]"
            for header in _header_list(message.headers)
        )
        parts.append(', "header_list": [' + ", ".join(listed) + "]")
    parts.append("}\n")
    return "".join(parts).encode("utf-8")


def _shown(raw: bytes) -> str:
    """Bytes for people: the text, or a hex preview when they are not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        more = "…" if len(raw) > _PREVIEW_BYTES else ""
        return f"<{len(raw)} bytes, not UTF-8: {raw[:_PREVIEW_BYTES].hex(' ')}{more}>"


class MessageSink:
    """Writes messages to stdout in one format; ``flush`` pushes them out (a closed pipe raises there)."""

    def __init__(self, write: Callable[[Message], None], flush: Callable[[], None]) -> None:
        self.write = write
        self.flush = flush


class _Buffered:
    """Lines gathered and written in large pieces: one system call per 64 KiB, not per message."""

    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self._lines: list[bytes] = []
        self._size = 0

    def add(self, line: bytes) -> None:
        self._lines.append(line)
        self._size += len(line)
        if self._size >= _WRITE_BYTES:
            self.flush()

    def flush(self) -> None:
        if self._lines:
            data = b"".join(self._lines)
            self._lines.clear()
            self._size = 0
            self._out.write(data)
        self._out.flush()


def open_sink(kind: Format) -> MessageSink:
    """A sink on the current stdout (looked up now, so click's test runner captures it)."""
    if kind == "pretty":
        return _pretty_sink()
    buffered = _Buffered(sys.stdout.buffer)
    add = buffered.add
    if kind == "value":
        return MessageSink(lambda message: add(message.value + b"\n"), buffered.flush)
    return MessageSink(lambda message: add(json_line(message)), buffered.flush)


def _pretty_sink() -> MessageSink:
    from rich.text import Text

    shown = console()

    def write_pretty(message: Message) -> None:
        title = Text(f"partition {message.partition} · offset {message.offset}", style="bold cyan")
        title.append(f" · {format_time(message.timestamp_ns)}", style="dim")
        title.append(f" · key {_shown(message.key)}", style="green")
        if message.tag is not None:
            title.append(f" · tag {message.tag}", style="magenta")
        for name, raw in message.headers.items():
            title.append(f" · {name}={_shown(raw)}", style="yellow")
        shown.print(title)
        shown.print(Text(_shown(message.value)))

    return MessageSink(write_pretty, lambda: shown.file.flush())
