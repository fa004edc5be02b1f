"""Format adiskq/5: a new stream stores headers as Kafka has them (a null value, a repeated name)
from a producer's ``Headers``, and every reader gives them back in order; an older stream refuses
them with how to move it, takes them once `adiskq upgrade` moved it, and an adiskq that knows only
formats 1 to 4 refuses a format-5 stream by its name.

Local stream only: stream formats and `adiskq upgrade` are a folder's files; headers with null
values and repeated names on Kafka are tested in tests/kafka_backend/test_api_both_backends.py.
"""

from __future__ import annotations

import json
import os

import pytest

import adiskq
from adiskq._errors import NotAStreamError
from adiskq._storage import settings as stream_settings
from adiskq._storage.upgrade import upgrade_stream

pytestmark = pytest.mark.anyio

KAFKA_PAIRS = [("trace", b"1"), ("tombstone", None), ("trace", b"2")]


def _settings(path: str) -> dict[str, object]:
    with open(os.path.join(path, "settings.json")) as file:
        loaded = json.load(file)
    assert isinstance(loaded, dict)
    return loaded


def _as_format(path: str, stored_format: str) -> None:
    stored = _settings(path) | {"format": stored_format}
    with open(os.path.join(path, "settings.json"), "w") as file:
        json.dump(stored, file)


async def _read_all(path: str) -> list[adiskq.Message]:
    async with adiskq.Consumer(path, end="close") as consumer:
        return [message async for message in consumer]


@pytest.mark.parametrize("compression", [None, "zstd"])
async def test_a_new_stream_stores_null_values_and_repeated_names_in_order(
    stream_path: str, compression: str | None
) -> None:
    async with adiskq.Producer(stream_path, compression=compression) as producer:
        await producer.push(b"pushed", key="k", headers=adiskq.Headers(KAFKA_PAIRS))
        await producer.push_many(
            [
                adiskq.Record(b"plain", headers={"a": b"1"}),
                adiskq.Record(b"many", headers=adiskq.Headers(KAFKA_PAIRS), tag="t"),
            ]
        )
    assert _settings(stream_path)["format"] == "adiskq/5"
    messages = await _read_all(stream_path)
    assert [m.value for m in messages] == [b"pushed", b"plain", b"many"]
    for message in (messages[0], messages[2]):
        assert type(message.headers) is adiskq.Headers
        assert message.header_list == tuple(KAFKA_PAIRS)
        assert dict(message.headers) == {"trace": b"2", "tombstone": b""}
        assert message.headers.get_all("trace") == [b"1", b"2"]
    assert type(messages[1].headers) is dict  # a record without either reads as before
    assert adiskq.read(stream_path, 0, 0).header_list == tuple(KAFKA_PAIRS)
    assert adiskq.read(stream_path, 0, 2).tag == "t"


@pytest.mark.parametrize("older", ["adiskq/1", "adiskq/2", "adiskq/4"])
async def test_an_older_stream_refuses_them_until_it_is_upgraded(stream_path: str, older: str) -> None:
    async with adiskq.Producer(stream_path) as producer:
        await producer.push(b"old")
    settings_before = _settings(stream_path)
    if older == "adiskq/4":
        settings_before["stream_id"] = "0" * 32
        with open(os.path.join(stream_path, "settings.json"), "w") as file:  # noqa: ASYNC230 - setup
            json.dump(settings_before, file)
    _as_format(stream_path, older)
    async with adiskq.Producer(stream_path) as producer:
        for push in (
            lambda: producer.push(b"x", headers=adiskq.Headers([("a", None)])),
            lambda: producer.push_many([b"innocent", adiskq.Record(b"x", headers=adiskq.Headers([("a", b"1")] * 2))]),
        ):
            with pytest.raises(adiskq.SettingsMismatchError, match=f"`adiskq upgrade {stream_path}`"):
                await push()
        # Headers holding neither are what a dict holds: any format takes them.
        await producer.push(b"plain", headers=adiskq.Headers([("a", b"1")]))
    assert [m.value for m in await _read_all(stream_path)] == [b"old", b"plain"]
    done = upgrade_stream(stream_path)
    assert (done.before, done.after) == (older, "adiskq/5")
    assert _settings(stream_path).get("stream_id") == settings_before.get("stream_id")  # an identity is kept
    async with adiskq.Producer(stream_path) as producer:
        await producer.push(b"new", headers=adiskq.Headers([("a", None)]))
    assert (await _read_all(stream_path))[-1].header_list == (("a", None),)


async def test_an_adiskq_that_knows_only_formats_1_to_4_refuses_format_5_by_name(
    stream_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with adiskq.Producer(stream_path) as producer:
        await producer.push(b"x", headers=adiskq.Headers([("a", None)]))
    # The check such an adiskq runs: the same code, with the formats it knew.
    monkeypatch.setattr(stream_settings, "READABLE_FORMATS", stream_settings.READABLE_FORMATS[:4])
    assert "adiskq/5" not in stream_settings.READABLE_FORMATS
    with pytest.raises(NotAStreamError, match=r"'adiskq/5'.*a newer adiskq format"):
        stream_settings.load_settings(stream_path)
    with pytest.raises(adiskq.StreamNotFoundError, match=r"'adiskq/5'.*a newer adiskq format"):
        await _read_all(stream_path)
