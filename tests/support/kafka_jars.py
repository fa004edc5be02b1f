"""The Java jars of the Kafka tests (pinned in tests/kafka/jars.txt), as checked class paths.

``scripts/fetch_kafka_jars.py`` fetches them from Maven Central into ``.cache/kafka/SET/`` (scripts/test
runs it); its reader of the manifest is the one used here, so the two cannot disagree. A jar missing
or not matching its SHA-256 fails the test saying what to run: these tests never skip.
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys
import types

import pytest

CHECKOUT = pathlib.Path(__file__).resolve().parent.parent.parent
FETCH = "python scripts/fetch_kafka_jars.py"


def _load_fetcher() -> types.ModuleType:
    """scripts/fetch_kafka_jars.py as a module (a script, loaded by its path)."""
    spec = importlib.util.spec_from_file_location("fetch_kafka_jars", CHECKOUT / "scripts" / "fetch_kafka_jars.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


fetcher = _load_fetcher()


def pinned_sets() -> set[str]:
    """The names of the manifest's sets (``clients-3.9.0``, ``broker-4.4.0``...)."""
    return {jar.set for jar in fetcher.pinned()}


def class_path(set_name: str) -> list[pathlib.Path]:
    """The cached jars of one pinned set, each checked against its pinned SHA-256."""
    jars = [jar for jar in fetcher.pinned() if jar.set == set_name]
    assert jars, f"no jars pinned for {set_name} in tests/kafka/jars.txt"
    for jar in jars:
        if not jar.path.is_file():
            pytest.fail(
                f"{set_name} is not fetched ({jar.path} is missing): run `{FETCH}` "
                "(scripts/test does), which downloads its jars from Maven Central into .cache/kafka/"
            )
        if not fetcher.cached(jar):
            pytest.fail(f"{jar.path} does not have its pinned SHA-256: delete it and run `{FETCH}` again")
    return [jar.path for jar in jars]
