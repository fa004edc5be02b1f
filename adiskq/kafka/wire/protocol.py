"""The Kafka wire protocol without I/O: frames, request and response headers, payloads (via kio).

Bytes in, requests out; responses in, bytes out. No sockets here (h11's rule): the server layer
(``_server.py``) owns connections. Every integer is big-endian. A frame::

    i32  size           bytes of the message that follows (this field excluded)
    ...  message        a request (client to broker) or a response (broker to client)

Request header, version 1 (non-flexible requests) and 2 (flexible ones: compact strings, tagged fields)::

    i16  api_key        which request (0 Produce, 1 Fetch, 3 Metadata, 18 ApiVersions, ...)
    i16  api_version    which version of it
    i32  correlation_id echoed in the response, so the client pairs them
    i16  client_id_len  then that many bytes of UTF-8; -1: null (a plain string even in v2)
   [...  tagged fields  v2 only: uvarint count, then per field uvarint tag, uvarint size, bytes]

Response header, version 0 (``i32 correlation_id``) or 1 (the same, then tagged fields: one 0 byte
for none). Which header versions a payload uses is fixed by Kafka's schema for that API and version
(kio's ``__header_schema__``): an ApiVersions response always takes header v0, for instance, so a
client can read it before it knows which versions the broker speaks.

The payloads themselves are read and written by kio, which is generated from Kafka's own message
schemas (``clients/src/main/resources/common/message/*.json``).
"""

from __future__ import annotations

import functools
import io
import struct
from collections.abc import Callable
from typing import Any, Final, NamedTuple

from kio.index import UnknownAPIKey, UnknownEntity, load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from .request_guard import GuardError, request_guard

__all__ = [
    "FRAME_PREFIX",
    "FastReader",
    "ProtocolError",
    "RequestHeader",
    "add_fast_reader",
    "decode_request",
    "encode_error_response",
    "encode_response",
    "frame_payload",
    "frame_size",
    "parse_header",
    "request_schema",
    "response_schema",
]

FRAME_PREFIX: Final = 4  # the i32 size in front of every frame
# The fixed part of a request header: api_key, api_version, correlation_id, client_id's length.
_FIXED: Final = struct.Struct(">hhih")
_SIZE: Final = struct.Struct(">i")
_ERROR_FRAME: Final = struct.Struct(">iih")  # size, correlation id, error code
_PLAIN_HEADER: Final = struct.Struct(">ii")  # size, correlation id
_FLEXIBLE_HEADER: Final = struct.Struct(">iiB")  # size, correlation id, no tagged fields


_new_header = tuple.__new__


class ProtocolError(ValueError):
    """A frame that is not a valid Kafka request (the connection is closed after it)."""


class RequestHeader(NamedTuple):
    """The header every request starts with."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def frame_size(prefix: bytes) -> int:
    """The size a frame's 4-byte prefix announces; ProtocolError for a negative one."""
    size: int = _SIZE.unpack(prefix)[0]
    if size < _FIXED.size:
        raise ProtocolError(f"a request frame of {size} bytes is shorter than a request header")
    return size


def parse_header(message: bytes) -> tuple[RequestHeader, int]:
    """The request header's fixed part and client id, and where the rest of the message starts."""
    if len(message) < _FIXED.size:
        raise ProtocolError(f"a request of {len(message)} bytes is shorter than a request header")
    api_key, api_version, correlation_id, client_id_len = _FIXED.unpack_from(message)
    at = _FIXED.size
    client_id: str | None = None
    if client_id_len >= 0:
        end = at + client_id_len
        if end > len(message):
            raise ProtocolError("the client id runs past the end of the request")
        try:
            client_id = message[at:end].decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolError("the client id is not UTF-8") from None
        at = end
    elif client_id_len != -1:
        raise ProtocolError(f"client id length {client_id_len} is neither -1 (null) nor a length")
    # tuple.__new__ straight: the named tuple's own __new__ is a Python function, one frame more.
    return _new_header(RequestHeader, (api_key, api_version, correlation_id, client_id)), at


def _read_uvarint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise ProtocolError("a varint runs past the end of the request")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7
        if shift > 28:
            raise ProtocolError("a varint is longer than 5 bytes")


def _skip_tagged_fields(data: bytes, at: int) -> int:
    """Skip a header's tagged fields (none is known to this broker in a request header)."""
    if at < len(data) and data[at] == 0:
        return at + 1  # none: what every client sends
    count, at = _read_uvarint(data, at)
    for _ in range(count):
        _, at = _read_uvarint(data, at)
        size, at = _read_uvarint(data, at)
        at += size
        if at > len(data):
            raise ProtocolError("a tagged field runs past the end of the request header")
    return at


@functools.cache
def request_schema(api_key: int, api_version: int) -> type[Any] | None:
    """kio's request class for an API and version; None when Kafka's schemas have none."""
    try:
        return load_request_schema(api_key, api_version)
    except (UnknownAPIKey, UnknownEntity):
        return None


@functools.cache
def response_schema(api_key: int, api_version: int) -> type[Any]:
    """kio's response class for an API and version."""
    return load_response_schema(api_key, api_version)


_readers: dict[type[Any], Any] = {}
_writers: dict[type[Any], Any] = {}


def _reader(schema: type[Any]) -> Any:
    reader = _readers.get(schema)
    if reader is None:
        reader = _readers[schema] = entity_reader(schema)
    return reader


def _writer(schema: type[Any]) -> Any:
    writer = _writers.get(schema)
    if writer is None:
        writer = _writers[schema] = entity_writer(schema)
    return writer


def decode_request(header: RequestHeader, message: bytes, at: int) -> Any:
    """The request's payload, as kio's dataclass for its API and version.

    ``at`` is where ``parse_header`` stopped. ProtocolError when the bytes are not that request.
    """
    decoder = _decoders.get(header[0] << 16 | header[1])  # api key and version, as the header's first i32
    if decoder is None:
        decoder = _decoder(header.api_key, header.api_version)
    return decoder(header, message, at)


Decoder = Callable[[RequestHeader, bytes, int], Any]
_decoders: dict[int, Decoder] = {}


class FastReader(NamedTuple):
    """A hand-written reader of one API's requests, for its handler: ``read(message, at, version)``
    answers the request in the handler's own shape, or None for bytes it does not take (kio then
    reads them, raising the error that names a fault, and ``from_kio`` turns what kio read into
    that shape)."""

    read: Callable[[bytes, int, int], Any]
    from_kio: Callable[[Any], Any]
    # The versions ``read`` knows (the gateway's served ones); kio alone decodes the others, which
    # the gateway answers with UNSUPPORTED_VERSION before decoding
    versions: range


_fast_readers: dict[int, FastReader] = {}


def add_fast_reader(api_key: int, reader: FastReader) -> None:
    """Read the requests of ``api_key`` with ``reader`` (before the first of them is decoded)."""
    _fast_readers[api_key] = reader


def _decoder(api_key: int, api_version: int) -> Decoder:
    """The decoding of one API version's requests: its schema, reader and header kind looked up once
    (a request's own work is then the reader's call)."""
    schema = request_schema(api_key, api_version)
    if schema is None:
        raise ProtocolError(f"no request schema for API key {api_key} version {api_version}")
    reader = _reader(schema)
    guard = request_guard(schema)
    flexible = bool(schema.__header_schema__.__flexible__)
    fast = _fast_readers.get(api_key)
    if fast is not None and api_version not in fast.versions:
        fast = None

    def decode(header: RequestHeader, message: bytes, at: int) -> Any:
        if flexible:
            at = _skip_tagged_fields(message, at)
        if fast is not None:
            request = fast.read(message, at, api_version)
            if request is not None:
                return request
        # kio's reader sizes an array from its count before reading an element: an impossible count
        # would abort the process (not raise), so the counts and lengths are checked first.
        try:
            guard(message, at)
        except GuardError as error:
            raise ProtocolError(f"API key {header.api_key} version {header.api_version}: {error}") from None
        try:
            request, size = reader(message, at)
        except Exception as error:  # kio raises what its readers meet: struct, Unicode, value errors
            raise ProtocolError(
                f"API key {header.api_key} version {header.api_version}: the request does not parse ({error})"
            ) from None
        # Bytes after the payload are ignored, as Kafka ignores them: librdkafka 2.x sends three
        # after a Metadata v12 request for every topic.
        del size
        if fast is None:
            return request
        try:
            return fast.from_kio(request)
        except (TypeError, ValueError) as error:  # kio reads a null where the handler needs values
            raise ProtocolError(
                f"API key {header.api_key} version {header.api_version}: the request does not parse ({error})"
            ) from None

    if 0 <= api_key < 1 << 15 and 0 <= api_version < 1 << 16:
        _decoders[api_key << 16 | api_version] = decode
    return decode


def encode_response(correlation_id: int, response: Any) -> bytes:
    """A whole response frame: size, the header the payload's schema takes, the payload."""
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    buffer.write(_SIZE.pack(correlation_id))
    if response.__header_schema__.__flexible__:
        buffer.write(b"\0")  # no tagged fields in the response header
    _writer(type(response))(buffer, response)
    frame = buffer.getbuffer()
    _SIZE.pack_into(frame, 0, len(frame) - FRAME_PREFIX)
    del frame
    return buffer.getvalue()


_flexible_responses: dict[tuple[int, int], bool] = {}


def frame_payload(correlation_id: int, api_key: int, api_version: int, payload: bytes | list[bytes]) -> bytes:
    """A whole response frame around a payload already encoded (``wire/fast_responses.py``): size, the
    header that API and version take, the payload. A payload given as its pieces (a Fetch's: its
    record batches among them) is joined once, into the frame."""
    flexible = _flexible_responses.get((api_key, api_version))
    if flexible is None:
        flexible = _flexible_responses[api_key, api_version] = bool(
            response_schema(api_key, api_version).__header_schema__.__flexible__
        )
    size = len(payload) if isinstance(payload, bytes) else sum(map(len, payload))
    if flexible:
        header = _FLEXIBLE_HEADER.pack(size + 5, correlation_id, 0)
    else:
        header = _PLAIN_HEADER.pack(size + 4, correlation_id)
    if isinstance(payload, bytes):
        return header + payload
    return b"".join([header, *payload])


def encode_error_response(correlation_id: int, error_code: int) -> bytes:
    """The shortest answer a broker can give a request it cannot parse: the correlation id and an
    error code, which is where every response version of ApiVersions starts too."""
    return _ERROR_FRAME.pack(_ERROR_FRAME.size - FRAME_PREFIX, correlation_id, error_code)
