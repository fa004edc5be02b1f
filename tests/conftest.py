"""Shared fixtures: every async test runs on asyncio and on Trio (anyio's pytest plugin)."""

from __future__ import annotations

import os
import pathlib

import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Both backends, for every test marked ``anyio``."""
    return str(request.param)


@pytest.fixture
def stream_path(tmp_path: pathlib.Path) -> str:
    """A path where no stream exists yet."""
    return os.fspath(tmp_path / "stream")
