"""The table of the requests the gateway answers: API key -> versions and handler.

How a handler is written and registered (one module per API under ``adiskq/kafka/apis/``)::

    from kio.schema.errors import ErrorCode
    from .._registry import RequestContext, register, respond

    @register(12, "Heartbeat", min_version=0, max_version=4)
    async def heartbeat(context: RequestContext, request: Any) -> Any:
        # ``request`` is kio's dataclass for the version the client sent (request.__version__);
        # ``respond`` builds the response dataclass of that same version, dropping the fields the
        # version does not have, so one handler serves every version.
        return respond(request, "HeartbeatResponse", throttle_time=0, error_code=ErrorCode.none)

A hot request (Produce, Fetch) also has a synchronous handler, registered with ``answers_now``: it
answers at once from the connection's socket callback when it can (a write that needs no wait, a
Fetch that has data), or returns ``Later``, whose ``finish`` the connection's task awaits for the
rest (a long poll, a write behind an fsync). Its awaited handler does both in turn.

A handler returns the response payload (a kio dataclass), or that payload already encoded as bytes
(Produce, whose answer ``wire/fast_responses.py`` writes without kio), or the whole response frame
(``ResponseFrame``: Fetch's, written by one compiled call), or None when the request takes no
response (Produce with acks=0). ``context.gateway`` is the gateway's shared state
(``GatewayCore``: the root folder, topics, writers, options), ``context.connection`` this
connection's (``Connection``: its peer, and ``state``, a dict a handler may keep per-connection
things in, such as a SASL exchange), ``context.header`` the request header (client id, correlation
id). The module is then imported in
``adiskq/kafka/apis/__init__.py``. Advertise a version only when a test with a real client proves it:
ApiVersions answers exactly the ranges registered here.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from .wire.protocol import RequestHeader, response_schema

if TYPE_CHECKING:
    from ._core import Connection, GatewayCore

__all__ = [
    "API_TABLE",
    "Api",
    "Handler",
    "Later",
    "NowHandler",
    "Park",
    "RequestContext",
    "ResponseFrame",
    "answers_now",
    "nested",
    "register",
    "respond",
]


@dataclasses.dataclass(slots=True)
class RequestContext:
    """What a handler knows besides the request itself."""

    gateway: GatewayCore
    connection: Connection
    header: RequestHeader


Handler = Callable[[RequestContext, Any], Awaitable[Any]]


class Later:
    """A request a synchronous handler could not answer at once: ``finish()`` answers it (the
    connection's task awaits it, before the connection's next request).

    ``park``, when set (a Fetch waiting on asyncio for its first wake-up), lets a connection served
    from callbacks wait without its task: ``park(answer, go_on, fail)`` registers the wait and
    returns the function that calls it off (None when this wait cannot be parked: ``finish``
    then). On the wake-up, the loop calls exactly one of ``answer(frame)`` (the answer),
    ``go_on(later)`` (the rest is the task's: a wait for more) and ``fail(error)``."""

    __slots__ = ("finish", "park")

    def __init__(self, finish: Callable[[], Awaitable[Any]], park: Park | None = None) -> None:
        self.finish = finish
        self.park = park


Park = Callable[
    [Callable[[Any], None], Callable[[Later], None], Callable[[Exception], None]], Callable[[], None] | None
]


NowHandler = Callable[[RequestContext, Any], Any]  # the answer, or Later


class ResponseFrame:
    """A handler's answer written whole, the frame's size and response header included (Fetch's,
    ``kafka_fetch_answer``): sent as it is."""

    __slots__ = ("frame",)

    def __init__(self, frame: bytes) -> None:
        self.frame = frame


class Api(NamedTuple):
    """One API the gateway answers, in versions ``min_version..max_version``."""

    key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler
    now: NowHandler | None = None  # answers without awaiting when it can (``answers_now``)


API_TABLE: dict[int, Api] = {}


def register(key: int, name: str, *, min_version: int, max_version: int) -> Callable[[Handler], Handler]:
    """Register ``handler`` for API ``key`` in those versions (each must have a kio schema: checked by
    ``tests/kafka/test_protocol.py``, not here, since loading every version's schema at import took
    seconds of the gateway's start-up; a schema is loaded on the first request of its version)."""

    def add(handler: Handler) -> Handler:
        if key in API_TABLE:
            raise ValueError(f"API key {key} is registered twice ({API_TABLE[key].name} and {name})")
        API_TABLE[key] = Api(key, name, min_version, max_version, handler)
        return handler

    return add


_Now = TypeVar("_Now", bound=NowHandler)


def answers_now(key: int) -> Callable[[_Now], _Now]:
    """Register the synchronous handler of an API registered already (see the module's docstring)."""

    def add(now: _Now) -> _Now:
        API_TABLE[key] = API_TABLE[key]._replace(now=now)
        return now

    return add


_FIELD_NAMES: dict[type[Any], frozenset[str]] = {}


def _field_names(cls: type[Any]) -> frozenset[str]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = frozenset(field.name for field in dataclasses.fields(cls))
    return names


@functools.cache
def _class_of(api_key: int, version: int, class_name: str) -> type[Any]:
    module = sys.modules[response_schema(api_key, version).__module__]
    cls: type[Any] = getattr(module, class_name)
    return cls


def _build(cls: type[Any], fields: dict[str, Any]) -> Any:
    names = _field_names(cls)
    return cls(**{name: value for name, value in fields.items() if name in names})


def respond(request: Any, class_name: str, /, **fields: Any) -> Any:
    """An instance of the response schema's ``class_name`` for the request's API and version, from
    ``fields`` less those this version does not have."""
    return _build(_class_of(request.__api_key__, request.__version__, class_name), fields)


def nested(request: Any, class_name: str, /, **fields: Any) -> Any:
    """The same as ``respond``, named for the nested parts of a response (topics, partitions)."""
    return _build(_class_of(request.__api_key__, request.__version__, class_name), fields)
