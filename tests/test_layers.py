"""The package's layers and seams, read from its sources (parsed with ``ast``, nothing imported).

What is pinned here:

- nothing in ``_sansio``, ``_storage`` or the Kafka gateway's wire code (``kafka/wire``) imports
  anyio, asyncio or Trio, and none imports anything above it (``_sansio`` only itself and the
  bottom modules: ``_errors``, ``_extras``, the compiled core; ``_storage`` and ``kafka/wire`` also
  ``_sansio``);
- ``_sansio`` is the log's codec alone: no Kafka library (the ``kafka`` extra's cramjam and kio);
- below the public API (``_sansio``, ``_storage``, ``_async``), only the event-loop modules import
  an event loop (asyncio, Trio, or anyio's private backends) or look one up in ``sys.modules``;
- no module outside a public class's own files touches a ``_``-prefixed member of that class
  (``Producer``, ``ConsumerGroup``), nor opens a ``Producer`` by calling ``__aenter__`` by hand:
  a writer that chooses its partitions (the Kafka gateway) goes through the package-internal
  interface of ``_async/partition_writes.py``.

The last two rules are not met everywhere yet. Each holds an explicit allow-list of today's
offenders, and that list may only shrink: the test fails for a new offender, and also for a listed
one that no longer offends (take it off the list, so it cannot come back unnoticed). When a list is
empty, the rule holds everywhere.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

PACKAGE: Final = Path(__file__).resolve().parent.parent / "adiskq"

LOOPS: Final = ("asyncio", "trio", "anyio")
# What the ``kafka`` extra installs: the Kafka gateway's libraries, which the log's layers never import.
KAFKA_LIBRARIES: Final = ("cramjam", "kio")
# The modules every layer may use: the exceptions, the optional parts' import guard, the compiled core.
BOTTOM: Final = ("adiskq._errors", "adiskq._extras", "adiskq._compiled")
# The packages whose import means "this module knows which event loop runs": anyio's public API is
# the layer's own (``_async`` is built on it), its backends are a loop each, and sniffio and anyio's
# private event-loop module answer which one runs.
LOOP_PACKAGES: Final = ("asyncio", "trio", "anyio._backends", "anyio._core._eventloop", "sniffio")

# The modules whose one job is an event loop's side of a seam: they may import their loop.
EVENT_LOOP_MODULES: Final = frozenset(
    {
        "adiskq._async.event_loop",  # which loop runs, asked once
        "adiskq._async.asyncio_loop",
        "adiskq._async.trio_loop",
        "adiskq._async.asyncio_waits",  # a consumer's waits: its event, the inotify descriptor's reading
        "adiskq._async.trio_waits",
        "adiskq._async.asyncio_deadlines",
        "adiskq._async.trio_deadlines",
        "adiskq._async.steadfast",
    }
)
# Modules below the API that import a loop (or look one up) today, besides the event-loop modules.
# Only to shrink: each loses its entry once its loop-specific part moves behind the event-loop seam.
STILL_IMPORTING_A_LOOP: Final[frozenset[str]] = frozenset()

# A public class, the module that defines it, and the modules that are its own (may touch its
# private members).
OWNERS: Final = {
    "Producer": (
        "adiskq._async.producer",
        frozenset({"adiskq._async.producer", "adiskq._async.partition_writes", "adiskq._async.shares"}),
    ),
    "ConsumerGroup": (
        "adiskq._async.group",
        frozenset({"adiskq._async.group", "adiskq._async.group_partitions", "adiskq._async.group_retrying"}),
    ),
}
# What a variable holding one is usually called (to tell whose ``x._state`` is read).
OWNER_WORDS: Final = {"Producer": "producer", "ConsumerGroup": "group"}
# (module, class, member) for every private member touched from outside the class's own files
# today. Only to shrink.
PRIVATE_MEMBERS_TOUCHED: Final[frozenset[tuple[str, str, str]]] = frozenset()
# Modules that open a producer by calling its ``__aenter__`` themselves today. Only to shrink.
OPENING_BY_HAND: Final[frozenset[str]] = frozenset()


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def _modules() -> dict[str, ast.Module]:
    """Every module of the package, parsed, by its dotted name."""
    return {_module_name(path): ast.parse(path.read_text(), str(path)) for path in sorted(PACKAGE.rglob("*.py"))}


def _is_package(name: str) -> bool:
    return (PACKAGE.parent / name.replace(".", "/") / "__init__.py").exists()


def _imports(name: str, tree: ast.Module) -> Iterator[tuple[str, int]]:
    """Every module ``name`` imports (at its top, in a function, under TYPE_CHECKING), absolute,
    with the line; ``from X import y`` also yields ``X.y`` (y may be a module)."""
    package = name if _is_package(name) else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            yield source, node.lineno
            for alias in node.names:
                yield f"{source}.{alias.name}", node.lineno


def _is_within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == package or module.startswith(package + ".") for package in packages)


def _loop_lookups(tree: ast.Module) -> Iterator[tuple[str, int]]:
    """``sys.modules.get("trio...")`` and the like: a module asking whether a loop's package is there."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and ast.unparse(node.func.value) == "sys.modules"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and _is_within(node.args[0].value, LOOP_PACKAGES)
        ):
            yield node.args[0].value, node.lineno


def _in_layer(name: str, *layers: str) -> bool:
    return _is_within(name, tuple(f"adiskq.{layer}" for layer in layers))


def test_the_bottom_layers_import_no_event_loop_library() -> None:
    """``_sansio``, ``_storage`` and ``kafka/wire`` are sans event loop: no anyio, asyncio or Trio, even lazily."""
    found = [
        f"{name}:{line} imports {imported}"
        for name, tree in _modules().items()
        if _in_layer(name, "_sansio", "_storage", "kafka.wire")
        for imported, line in _imports(name, tree)
        if _is_within(imported, LOOPS)
    ]
    assert found == []


def test_sansio_imports_nothing_above_it() -> None:
    """``_sansio`` imports only itself and the bottom modules (``_errors``, ``_extras``, the compiled core)."""
    allowed = ("adiskq._sansio", *BOTTOM)
    found = [
        f"{name}:{line} imports {imported}"
        for name, tree in _modules().items()
        if _in_layer(name, "_sansio")
        for imported, line in _imports(name, tree)
        if _is_within(imported, ("adiskq",)) and not _is_within(imported, allowed) and imported != "adiskq"
    ]
    assert found == []


def test_sansio_imports_no_kafka_library() -> None:
    """The Kafka codecs live in ``kafka/wire``: ``_sansio`` runs without the ``kafka`` extra."""
    found = [
        f"{name}:{line} imports {imported}"
        for name, tree in _modules().items()
        if _in_layer(name, "_sansio")
        for imported, line in _imports(name, tree)
        if _is_within(imported, KAFKA_LIBRARIES)
    ]
    assert found == []


def test_the_kafka_wire_code_imports_only_the_codec_below_it() -> None:
    """``kafka/wire`` (bytes in, requests out; responses in, bytes out) imports only itself,
    ``_sansio`` and the bottom modules: never the gateway's server, handlers or the log's storage."""
    allowed = ("adiskq.kafka.wire", "adiskq._sansio", *BOTTOM)
    found = [
        f"{name}:{line} imports {imported}"
        for name, tree in _modules().items()
        if _in_layer(name, "kafka.wire")
        for imported, line in _imports(name, tree)
        if _is_within(imported, ("adiskq",)) and not _is_within(imported, allowed) and imported != "adiskq"
    ]
    assert found == []
    assert any(_in_layer(name, "kafka.wire") for name in _modules()), "kafka/wire moved: point these rules at it"


def test_storage_imports_nothing_above_it() -> None:
    """``_storage`` imports only itself, ``_sansio`` and the bottom modules."""
    allowed = ("adiskq._storage", "adiskq._sansio", *BOTTOM)
    found = [
        f"{name}:{line} imports {imported}"
        for name, tree in _modules().items()
        if _in_layer(name, "_storage")
        for imported, line in _imports(name, tree)
        if _is_within(imported, ("adiskq",)) and not _is_within(imported, allowed) and imported != "adiskq"
    ]
    assert found == []


def _modules_knowing_the_loop() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for name, tree in _modules().items():
        if not _in_layer(name, "_sansio", "_storage", "_async"):
            continue
        hits = [
            f"{line}: import {imported}"
            for imported, line in _imports(name, tree)
            if _is_within(imported, LOOP_PACKAGES)
        ]
        hits += [f"{line}: sys.modules lookup of {looked_up}" for looked_up, line in _loop_lookups(tree)]
        if hits:
            found[name] = hits
    return found


def test_only_the_event_loop_modules_import_a_loop() -> None:
    """Below the API, a module that imports asyncio, Trio or an anyio backend (or looks one up) is
    an event-loop module, or one of today's listed others."""
    knowing = _modules_knowing_the_loop()
    unlisted = {name: hits for name, hits in knowing.items() if name not in EVENT_LOOP_MODULES | STILL_IMPORTING_A_LOOP}
    assert unlisted == {}, "a new module below the API imports an event loop: put that behind the event-loop seam"
    cured = sorted(STILL_IMPORTING_A_LOOP - set(knowing))
    assert cured == [], "these no longer import a loop: take them off STILL_IMPORTING_A_LOOP"
    assert set(_modules()) >= EVENT_LOOP_MODULES, "an event-loop module listed here does not exist"


def _private_members(class_name: str) -> frozenset[str]:
    """The ``_``-prefixed members of a class (not dunders): its methods and properties, and the
    attributes its methods set or read on ``self``."""
    module, _ = OWNERS[class_name]
    tree = _modules()[module]
    found = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == class_name)
    names: set[str] = set()
    for node in ast.walk(found):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            names.add(node.attr)
    return frozenset(name for name in names if name.startswith("_") and not name.endswith("__"))


_REFLECTION: Final = ("getattr", "setattr", "hasattr", "delattr")


def _member_accesses(tree: ast.Module) -> Iterator[tuple[str, ast.expr]]:
    """Each ``x.name`` and ``getattr(x, "name")`` (setattr, hasattr, delattr) of a module: the
    name, and ``x``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            yield node.attr, node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _REFLECTION
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            yield node.args[1].value, node.args[0]


def _private_members_touched(modules: dict[str, ast.Module] | None = None) -> set[tuple[str, str, str]]:
    """(module, class, member) for each ``x._member`` (or ``getattr(x, "_member")``) outside the
    class's own files, ``x`` not ``self``. A name both classes have (``_state``) is counted for the
    class ``x`` is named after."""
    members = {class_name: _private_members(class_name) for class_name in OWNERS}
    touched: set[tuple[str, str, str]] = set()
    for class_name, (_, own) in OWNERS.items():
        others = set().union(*(found for other, found in members.items() if other != class_name))
        for name, tree in (_modules() if modules is None else modules).items():
            if name in own:
                continue
            for member, owner in _member_accesses(tree):
                if (
                    member in members[class_name]
                    and not (isinstance(owner, ast.Name) and owner.id in ("self", "cls"))
                    and (member not in others or OWNER_WORDS[class_name] in ast.unparse(owner).lower())
                ):
                    touched.add((name, class_name, member))
    return touched


def test_no_module_touches_a_public_class_s_private_members() -> None:
    """A private member of ``Producer`` or ``ConsumerGroup`` is its own files' business: another
    module uses the public API or a named package-internal interface."""
    touched = _private_members_touched()
    assert sorted(touched - PRIVATE_MEMBERS_TOUCHED) == [], "use a public or package-internal interface instead"
    assert sorted(PRIVATE_MEMBERS_TOUCHED - touched) == [], "no longer touched: take these off the allow-list"


def test_no_module_opens_a_producer_by_hand() -> None:
    """``Producer`` is opened by ``async with`` (or a named helper), not by a hand-called ``__aenter__``."""
    _, own = OWNERS["Producer"]
    opening = {
        name
        for name, tree in _modules().items()
        if name not in own  # partition_writes.opened: the one way to open a producer for keeps
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr == "__aenter__"
        and "producer" in ast.unparse(node.value).lower()
    }
    assert sorted(opening - OPENING_BY_HAND) == []
    assert sorted(OPENING_BY_HAND - opening) == [], "no longer opened by hand: take these off the allow-list"


def test_the_private_member_scan_finds_each_way_of_touching_a_producer_s_privates() -> None:
    """The scan itself can fail: a module outside the producer's files that reads, calls, or
    reaches by name a private member is found, whatever its variable is called when the member is
    the producer's alone; a member both classes have only when the variable says it is a producer."""
    own = _private_members("Producer")
    shared = sorted(own & _private_members("ConsumerGroup"))[0]  # ``_state``, say
    alone, by_name = sorted(own - _private_members("ConsumerGroup"))[:2]
    offender = ast.parse(
        f"def f(producer, p, owner, group):\n"
        f"    producer.{alone}\n"  # read
        f"    p.{alone}.clear()\n"  # any variable: only Producer has it
        f"    owner.producer.{shared}\n"  # a shared name, on something named a producer
        f"    getattr(p, {by_name!r})\n"  # by name
        f"    group.{shared}\n"  # a shared name on a group: the group's, not the producer's
        f"    self.{alone}\n"  # a class's own attribute of the same name
    )
    touched = {
        member
        for _, class_name, member in _private_members_touched({"adiskq.kafka.offender": offender})
        if class_name == "Producer"
    }
    assert touched == {alone, shared, by_name}


@pytest.mark.parametrize("class_name", sorted(OWNERS))
def test_the_private_member_scan_sees_the_class(class_name: str) -> None:
    """The scan finds members (a renamed class or module would make every check above pass vacuously)."""
    members = _private_members(class_name)
    assert len(members) > 5
