"""A Spark write with a `tag` column to a stream in format adiskq/1 (before tags) is refused on the
driver, before any task appends, saying how to move the stream; without tags it goes on."""

from __future__ import annotations

import json
import os

import pytest
from support.cli import fill

import adiskq
from adiskq.spark._options import WriteOptions
from adiskq.spark._writer import prepare_stream


def test_a_tag_column_is_refused_for_a_format_1_stream_before_anything_is_written(stream_path: str) -> None:
    """prepare_stream (the driver's step before any task) raises SettingsMismatchError naming
    `adiskq upgrade` for a tag column, and returns the stream's facts for rows without tags."""
    fill(stream_path, [b"old"])
    settings_path = os.path.join(stream_path, "settings.json")
    with open(settings_path) as file:
        data = json.load(file)
    with open(settings_path, "w") as file:
        json.dump(data | {"format": "adiskq/1"}, file)
    options = WriteOptions.parse({"path": stream_path})
    with pytest.raises(adiskq.SettingsMismatchError, match=f"`adiskq upgrade {stream_path}`"):
        prepare_stream(options, tagged=True)
    assert prepare_stream(options).partition_count == 1
    assert adiskq.stats(stream_path).message_count == 1
