"""The compiled core's own answers on compressed values (the differential tests are in
test_compression_codec.py): it refuses a hostile frame itself, rather than relying on the reference."""

from __future__ import annotations

from typing import Any

import pytest
from compression_support import stream_dictionary
from test_compression_codec import HOSTILE, LIMIT, record

from adiskq._sansio.compression import DICTIONARY_ID_BASE
from adiskq._sansio.native import NATIVE

# The compiled module itself (scripts/test runs this file only where it is built).
compiled: Any = NATIVE


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_compiled_decoder_never_returns_a_hostile_value(name: str) -> None:
    """The compiled decoder itself answers (position, False) for a hostile frame: it never hands out a value."""
    prepared = compiled.zstd_prepare(stream_dictionary(), 3)
    buf = record(HOSTILE[name])
    assert compiled.decode_messages(buf, 0, 0, 1, LIMIT, {DICTIONARY_ID_BASE + 1: prepared}) == (0, False)
