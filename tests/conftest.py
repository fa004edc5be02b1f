"""Shared fixtures: every async test runs on asyncio and on Trio (anyio's pytest plugin)."""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile
from collections.abc import Iterator

import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Both backends, for every test marked ``anyio``."""
    return str(request.param)


@pytest.fixture
def stream_path(tmp_path: pathlib.Path) -> str:
    """A path where no stream exists yet."""
    return os.fspath(tmp_path / "stream")


@pytest.fixture
def shared_dir() -> Iterator[str]:
    """A folder every user can traverse (pytest's own tmp folders are private to their owner)."""
    path = tempfile.mkdtemp(prefix="adiskq-perm-")
    os.chmod(path, 0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)
