"""mypy (strict) sees the types serializers give: a ``Message`` whose ``value`` is the model."""

from __future__ import annotations

import pathlib

import mypy.api

HERE = pathlib.Path(__file__).parent


def run_mypy(path: pathlib.Path) -> tuple[int, str]:
    out, err, status = mypy.api.run(["--strict", "--no-incremental", "--python-version", "3.11", str(path)])
    return status, out + err


def test_typed_readers_and_producers_check_clean() -> None:
    """Deserialized messages are typed as the model; plain ones stay ``Message[bytes, bytes]``."""
    status, output = run_mypy(HERE / "typed_readers.py")
    assert status == 0, output


def test_mypy_catches_a_value_of_the_wrong_type(tmp_path: pathlib.Path) -> None:
    """Pushing a non-model to a typed producer, or using a model's value as bytes, is a type error."""
    snippet = tmp_path / "wrong.py"
    snippet.write_text(
        "import msgspec\n"
        "import adiskq\n"
        "from adiskq.serializers import msgspec_json\n"
        "class Order(msgspec.Struct):\n"
        "    id: int\n"
        "async def main(path: str) -> None:\n"
        "    orders = msgspec_json(Order)\n"
        "    async with adiskq.Producer(path, value_serializer=orders.serializer) as producer:\n"
        "        await producer.push(b'raw')\n"
        "    async with adiskq.Consumer(path, value_deserializer=orders.deserializer) as consumer:\n"
        "        async for message in consumer:\n"
        "            message.value.decode()\n"
    )
    status, output = run_mypy(snippet)
    assert status == 1, output
    assert 'Argument 1 to "push" of "Producer" has incompatible type "bytes"; expected "Order"' in output
    assert '"Order" has no attribute "decode"' in output
