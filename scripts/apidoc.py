"""Writes docs/API.md, the API reference, from the docstrings of adiskq's public names.

python scripts/apidoc.py           # rewrite docs/API.md
python scripts/apidoc.py --check   # exit 1 if docs/API.md is out of date (the suite runs this)
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
TARGET = ROOT / "docs" / "API.md"
MODULES = ("adiskq", "adiskq.otel", "adiskq.serializers", "adiskq.spark")


def public_members(cls: type) -> list[tuple[str, object]]:
    """A class's public methods and properties, in definition order: its own, then those it gets
    from private base classes of its module (``_Reader`` for ``Consumer``), unless it overrides them."""
    members: dict[str, object] = {}
    for klass in cls.__mro__:
        if klass is not cls and not (klass.__name__.startswith("_") and klass.__module__.startswith("adiskq")):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_") or name in members:
                continue
            if isinstance(value, property | staticmethod | classmethod) or inspect.isfunction(value):
                members[name] = value
    return list(members.items())


def signature(name: str, value: object) -> str:
    target = value.__func__ if isinstance(value, staticmethod | classmethod) else value
    if isinstance(target, property):
        return name
    try:
        text = str(inspect.signature(target))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return name
    prefix = "async " if inspect.iscoroutinefunction(target) else ""
    return f"{prefix}{name}{text}"


def document_name(module: object, name: str) -> list[str]:
    obj = getattr(module, name)
    lines = []
    if inspect.isclass(obj):
        kind = "exception" if issubclass(obj, BaseException) else "class"
        lines.append(f"### `{name}` ({kind})\n")
        if kind == "class" and not issubclass(obj, tuple):
            with contextlib.suppress(TypeError, ValueError):
                lines.append(f"```python\n{name}{inspect.signature(obj)}\n```\n")
        elif issubclass(obj, tuple) and hasattr(obj, "_fields"):
            lines.append(f"```python\n{name}({', '.join(obj._fields)})\n```\n")
        lines.append((inspect.getdoc(obj) or "") + "\n")
        if kind == "class":
            for member, value in public_members(obj):
                doc = inspect.getdoc(value) or ""
                lines.append(f"- `{signature(member, value)}`: {doc.splitlines()[0] if doc else ''}")
                rest = doc.splitlines()[1:]
                lines.extend(f"  {line}".rstrip() for line in rest)
            lines.append("")
    elif callable(obj):
        lines.append(f"### `{signature(name, obj)}`\n")
        lines.append((inspect.getdoc(obj) or "") + "\n")
    else:  # a constant: its value, not its type's documentation
        shown = obj.simpleString() if hasattr(obj, "simpleString") else repr(obj)
        lines.append(f"### `{name}` (constant)\n")
        lines.append(f"```\n{shown}\n```\n")
    return lines


def render() -> str:
    lines = [
        "# adiskq API reference",
        "",
        "Generated from the docstrings by `python scripts/apidoc.py`; do not edit by hand.",
        "",
    ]
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        lines.append(f"## `{module_name}`\n")
        lines.append((inspect.getdoc(module) or "") + "\n")
        for name in module.__all__:
            lines.extend(document_name(module, name))
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="fail if docs/API.md is out of date")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not TARGET.exists() or TARGET.read_text() != text:
            print("docs/API.md is out of date: run python scripts/apidoc.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
