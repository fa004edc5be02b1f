"""A request's counts and lengths checked against the bytes it has, before kio reads it.

kio's compiled readers size their result from the count on the wire before reading an element
(``Vec::with_capacity(count)``): an array whose count says 0x6f001400 asks for hundreds of GB, the
allocation fails and Rust aborts the whole process, not the request. One small frame would bring the
gateway down. Every element of a Kafka array takes at least one byte on the wire, and every string or
bytes field takes its length in bytes, so a count or length larger than the bytes left in the request
cannot be honest: it is refused here (``ProtocolError``, naming the field) before kio allocates.

A null where Kafka's schema has none (an array, string or bytes field that is not nullable: a
ListOffsets request whose topics are null) is refused here too, as Kafka's own readers refuse it:
kio would read it as None, which the handlers, written for the schema, do not expect.

The check walks the request the way kio's reader will, from the same schema (kio's dataclass for the
API and version, whose fields carry ``metadata["kafka_type"]``). Encodings, as kio reads them:

    int8 bool uint8                      1 byte      int16 uint16 error_code          2 bytes
    int32 uint32 timedelta_i32           4 bytes     int64 uint64 float64 timedelta_i64
    uuid                                16 bytes       datetime_i64                   8 bytes
    string (legacy)        i16 length, then that many bytes; -1: null
    bytes, records (legacy) i32 length, then that many bytes; -1: null
    string, bytes, records (flexible)    uvarint length + 1, then the bytes; 0: null
    array (legacy)         i32 count, then the elements; -1: null
    array (flexible)       uvarint count + 1, then the elements; 0: null
    nullable struct        i8 marker (-1 null, 1 present), then the struct
    tagged fields (flexible structs, after the other fields)
                           uvarint count, then per field: uvarint tag, uvarint size, the field

The walk is generated once per schema as Python source (straight-line code: fixed-size runs of
fields become one addition, an array of fixed-size elements one multiplication) and cached with the
request's decoder, so a request pays a few bytecodes a field, no call a field. A request that ends
too early stops the walk without an error: kio then meets the same end and names it.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from typing import Any, Final

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

__all__ = ["GuardError", "RequestGuard", "request_guard"]

RequestGuard = Callable[[bytes, int], None]

_FIXED_SIZES: Final = {
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_LENGTHED: Final = frozenset({"string", "bytes", "records"})


class GuardError(ValueError):
    """A count or length the request cannot hold (``wire.protocol`` turns it into ProtocolError)."""


def _read_uvarint(data: bytes, at: int) -> tuple[int, int]:
    """An unsigned varint of up to 5 bytes (kio reads no longer one), and where it ends."""
    value = shift = 0
    while True:
        byte = data[at]  # IndexError past the end: the walk stops, kio names the end
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7
        if shift > 28:
            raise GuardError("a varint is longer than 5 bytes")


def _too_long(what: str, field: str, value: int, left: int) -> GuardError:
    return GuardError(f"{field}: {what} {value} is more than the {left} bytes left in the request")


def _negative(what: str, field: str, value: int) -> GuardError:
    return GuardError(f"{field}: {what} {value} is negative and not -1 (null)")


def _null(field: str) -> GuardError:
    return GuardError(f"{field} is null, which Kafka's schema does not allow for it")


class _Emitter:
    """Python source for one schema's walk; ``at`` is the position, ``n`` the request's length."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.pending = 0  # fixed-size bytes not yet added to ``at``
        self.functions: list[str] = []  # one walk a known tagged field, called from ``_tags``
        self.tag_tables: list[dict[int, str]] = []
        self.serial = 0

    def name(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix}{self.serial}"

    def flush(self, indent: str) -> None:
        if self.pending:
            self.lines.append(f"{indent}at += {self.pending}")
            self.pending = 0

    def emit(self, indent: str, line: str) -> None:
        self.flush(indent)
        self.lines.append(indent + line)

    def uvarint(self, indent: str, target: str) -> None:
        """``target`` = the uvarint at ``at``: one or two bytes inline (every count and nearly every
        length: a Produce's records up to 16 KiB), longer ones by a call."""
        self.emit(indent, f"{target} = data[at]")
        self.emit(indent, f"if {target} < 0x80:")
        self.emit(indent + "    ", "at += 1")
        self.emit(indent, "elif data[at + 1] < 0x80:")
        self.emit(indent + "    ", f"{target} = ({target} & 0x7F) | data[at + 1] << 7")
        self.emit(indent + "    ", "at += 2")
        self.emit(indent, "else:")
        self.emit(indent + "    ", f"{target}, at = _read_uvarint(data, at)")

    def entity(self, indent: str, entity: type[Any], path: str) -> None:
        flexible = bool(entity.__flexible__)
        tagged: dict[int, tuple[dataclasses.Field[Any], str]] = {}
        for field in dataclasses.fields(entity):
            tag = get_field_tag(field)
            if tag is not None:
                tagged[int(tag)] = (field, f"{path}.{field.name}")
                continue
            self.field(indent, field, flexible, is_optional(field), f"{path}.{field.name}")
        if flexible:
            self.tags(indent, tagged, path)

    def tags(self, indent: str, tagged: dict[int, tuple[dataclasses.Field[Any], str]], path: str) -> None:
        table: dict[int, str] = {}
        for tag, (field, field_path) in tagged.items():
            function = self.name("_tag")
            inner = _Emitter()
            inner.serial, inner.functions, inner.tag_tables = self.serial, self.functions, self.tag_tables
            # A tagged field is never null: its absence is how it is left out (kio reads it so).
            # Its null on the wire is left to kio, as before: only untagged fields are refused.
            inner.field("    ", field, True, False, field_path, refuse_null=False)
            inner.flush("    ")
            self.serial = inner.serial
            body = inner.lines or ["    pass"]
            self.functions.append("\n".join([f"def {function}(data, at, n):", *body, "    return at"]))
            table[tag] = function
        self.tag_tables.append(table)
        tables = len(self.tag_tables) - 1
        self.emit(indent, "if data[at] == 0:")
        self.emit(indent + "    ", "at += 1")
        self.emit(indent, "else:")
        self.emit(indent + "    ", f"at = _tags(data, at, n, _TAG_TABLES[{tables}], {path + ' tagged fields'!r})")

    def field(
        self,
        indent: str,
        field: dataclasses.Field[Any],
        flexible: bool,
        optional: bool,
        path: str,
        *,
        refuse_null: bool = True,
    ) -> None:
        # A null where the schema has no null (an array, string or bytes field that is not
        # nullable) is refused, as Kafka's generated readers refuse it ("non-nullable field ...
        # was serialized as null"): kio would read it as None, which no handler expects.
        nullable = optional or not refuse_null
        kind = classify_field(field)
        match kind:
            case PrimitiveField():
                self.primitive(indent, get_schema_field_type(field), flexible, path, nullable)
            case EntityField(entity):
                if optional:
                    self.emit(indent, "if data[at] != 0xFF:")  # i8 -1: null, nothing follows
                    self.pending += 1
                    self.entity(indent + "    ", entity, path)
                    self.flush(indent + "    ")
                    self.emit(indent, "else:")
                    self.emit(indent + "    ", "at += 1")
                else:
                    self.entity(indent, entity, path)
            case PrimitiveTupleField():
                kafka_type = get_schema_field_type(field)
                size = _FIXED_SIZES.get(kafka_type)
                element = f"{path}[]"
                self.array(
                    indent,
                    flexible,
                    element,
                    size,
                    lambda i: self.primitive(i, kafka_type, flexible, element, nullable),
                    nullable,
                )
            case EntityTupleField(entity):
                self.array(
                    indent,
                    flexible,
                    f"{path}[]",
                    None,
                    lambda inner: self.entity(inner, entity, path + "[]"),
                    nullable,
                )

    def primitive(self, indent: str, kafka_type: str, flexible: bool, path: str, nullable: bool) -> None:
        size = _FIXED_SIZES.get(kafka_type)
        if size is not None:
            self.pending += size
            return
        if kafka_type not in _LENGTHED:
            raise NotImplementedError(f"{path}: kafka type {kafka_type!r} has no known encoding")
        what = "length"
        if flexible:
            self.uvarint(indent, "size")
            self.emit(indent, "if size:")
            self.emit(indent + "    ", "size -= 1")
            self.emit(indent + "    ", "if size > n - at:")
            self.emit(indent + "        ", f"raise _too_long({what!r}, {path!r}, size, n - at)")
            self.emit(indent + "    ", "at += size")
            if not nullable:
                self.emit(indent, "else:")
                self.emit(indent + "    ", f"raise _null({path!r})")
            return
        reader = "_I16" if kafka_type == "string" else "_I32"
        self.emit(indent, f"size = {reader}(data, at)[0]")
        self.pending += 2 if kafka_type == "string" else 4
        self.emit(indent, "if size > n - at:")
        self.emit(indent + "    ", f"raise _too_long({what!r}, {path!r}, size, n - at)")
        self.emit(indent, "if size >= 0:")
        self.emit(indent + "    ", "at += size")
        self.emit(indent, "elif size != -1:")
        self.emit(indent + "    ", f"raise _negative({what!r}, {path!r}, size)")
        if not nullable:
            self.emit(indent, "else:")
            self.emit(indent + "    ", f"raise _null({path!r})")

    def array(
        self,
        indent: str,
        flexible: bool,
        path: str,
        size: int | None,
        element: Callable[[str], None],
        nullable: bool,
    ) -> None:
        count = self.name("count")
        if flexible:
            self.uvarint(indent, count)
            self.emit(indent, f"{count} -= 1  # 0 on the wire: null, -1 here")
        else:
            self.emit(indent, f"{count} = _I32(data, at)[0]")
            self.pending += 4
            self.emit(indent, f"if {count} < -1:")
            self.emit(indent + "    ", f"raise _negative('count', {path!r}, {count})")
        if not nullable:
            self.emit(indent, f"if {count} == -1:")
            self.emit(indent + "    ", f"raise _null({path[:-2]!r})")
        # Every element takes at least one byte, a fixed-size one exactly its size.
        self.emit(indent, f"if {count} * {size or 1} > n - at:")
        self.emit(indent + "    ", f"raise _too_long('count', {path!r}, {count}, n - at)")
        if size is not None:
            self.emit(indent, f"if {count} > 0:")
            self.emit(indent + "    ", f"at += {count} * {size}")
            return
        self.emit(indent, f"for _ in range({count}):")
        before = len(self.lines)
        element(indent + "    ")
        self.flush(indent + "    ")
        if len(self.lines) == before:
            self.lines.append(indent + "    pass")


def _tags(data: bytes, at: int, n: int, table: dict[int, Callable[[bytes, int, int], int]], path: str) -> int:
    """Walk a struct's tagged fields: each size within the request, the known ones walked too."""
    count, at = _read_uvarint(data, at)
    if count > n - at:
        raise _too_long("count", path, count, n - at)
    for _ in range(count):
        tag, at = _read_uvarint(data, at)
        size, at = _read_uvarint(data, at)
        if size > n - at:
            raise _too_long(f"size of tag {tag}", path, size, n - at)
        walk = table.get(tag)
        if walk is not None:
            walk(data, at, at + size)  # the field's own counts, within its size
        at += size
    return at


_I16 = struct.Struct(">h").unpack_from
_I32 = struct.Struct(">i").unpack_from


def _compile(schema: type[Any]) -> tuple[RequestGuard, str]:
    """The walk of ``schema``'s requests, and its source (for the tests and for reading)."""
    emitter = _Emitter()
    emitter.entity("        ", schema, schema.__name__)
    emitter.flush("        ")
    body = emitter.lines or ["        pass"]
    source = "\n".join(
        [
            *emitter.functions,
            "def guard(data, at):",
            "    n = len(data)",
            "    try:",
            *body,
            "    except (IndexError, struct.error):",
            "        pass  # the request ends too early: kio meets the same end and names it",
        ]
    )
    namespace: dict[str, Any] = {
        "struct": struct,
        "_I16": _I16,
        "_I32": _I32,
        "_read_uvarint": _read_uvarint,
        "_too_long": _too_long,
        "_negative": _negative,
        "_null": _null,
        "_tags": _tags,
    }
    exec(compile(source, f"<request guard of {schema.__name__} v{schema.__version__}>", "exec"), namespace)  # noqa: S102 (our own source, from kio's schema)
    namespace["_TAG_TABLES"] = [{tag: namespace[name] for tag, name in table.items()} for table in emitter.tag_tables]
    guard: RequestGuard = namespace["guard"]
    return guard, source


_guards: dict[type[Any], RequestGuard] = {}


def request_guard(schema: type[Any]) -> RequestGuard:
    """The check of a request's counts and lengths for kio's ``schema``, built once a schema."""
    guard = _guards.get(schema)
    if guard is None:
        guard = _guards[schema] = _compile(schema)[0]
    return guard
