"""The API reference: every public name is documented, and docs/API.md is current."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys

from support.paths import ROOT_DIR

import adiskq

ROOT = ROOT_DIR
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import apidoc  # noqa: E402 - the generator lives in scripts/


def test_every_public_name_and_member_has_a_docstring() -> None:
    """Each name in adiskq.__all__, and each public method or property of its classes, says what it does."""
    undocumented = []
    for module_name in apidoc.MODULES:
        module = __import__(module_name, fromlist=["__all__"])
        for name in module.__all__:
            obj = getattr(module, name)
            if not (inspect.isclass(obj) or callable(obj)):
                continue  # a constant (adiskq.spark.SCHEMA): its value is its documentation
            if not inspect.getdoc(obj):
                undocumented.append(name)
            if inspect.isclass(obj) and not issubclass(obj, BaseException):
                undocumented += [
                    f"{name}.{member}" for member, value in apidoc.public_members(obj) if not inspect.getdoc(value)
                ]
    assert not undocumented


def test_the_api_reference_is_current() -> None:
    """docs/API.md is what scripts/apidoc.py makes from today's docstrings."""
    result = subprocess.run([sys.executable, "scripts/apidoc.py", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_the_top_level_exports_its_names() -> None:
    """Every name in __all__ exists, the async classes included (they load on first use)."""
    assert all(hasattr(adiskq, name) for name in adiskq.__all__)
