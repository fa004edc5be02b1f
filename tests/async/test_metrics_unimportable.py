"""An OpenTelemetry this process cannot import (another user's unreadable venv) costs nothing but a debug line.

Local stream only: the import is the same for both backends (README's capability table:
metrics), and a stream needs no broker."""

from __future__ import annotations

import logging
import sys
import types

import pytest

from adiskq._async import metrics


def test_an_opentelemetry_that_cannot_be_imported_records_nothing_and_breaks_nothing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """With a provider's module loaded but the rest of OpenTelemetry unreadable, readers and
    producers are made without instruments (a debug log line says why) instead of raising ImportError."""

    def unreadable() -> None:
        raise ImportError("cannot import name 'metrics' from 'opentelemetry' (unknown location)")

    monkeypatch.setattr(metrics, "_instance", metrics._UNSET)
    monkeypatch.setitem(sys.modules, "opentelemetry.trace", types.ModuleType("opentelemetry.trace"))
    monkeypatch.setattr(metrics, "Telemetry", unreadable)
    with caplog.at_level(logging.DEBUG, logger="adiskq"):
        assert metrics.telemetry() is None
        assert metrics.telemetry() is None  # decided once
    assert caplog.text.count("OpenTelemetry cannot be imported") == 1
