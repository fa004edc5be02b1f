"""A process that only produces loads only what pushing needs: its memory is what it uses.

Local stream only: a kafka:// URL loads the Kafka client by design (README's capability table:
kafka=)."""

from __future__ import annotations

import textwrap

import pytest
from support.snippets import run_snippet

# A program that runs its event loop once without adiskq (what the loop itself imports), then imports
# adiskq, pushes one keyed message, and prints the modules that loaded since.
PUSH_ONE = textwrap.dedent(
    """
    import sys

    import anyio

    async def nothing():
        pass

    anyio.run(nothing, backend=sys.argv[2])
    before = set(sys.modules)

    import adiskq

    async def main(path):
        async with adiskq.Producer(path, partitions=1) as producer:
            await producer.push(b"v", key=b"ord-00000001")

    anyio.run(main, sys.argv[1], backend=sys.argv[2])
    print(" ".join(sorted(set(sys.modules) - before)))
    """
)

# Modules a producer has no use for: the read, stats and group paths (and the bz2 and lzma modules
# shutil brings), consumers and their wake-ups, the command line, the Kafka server, Spark, metrics
# and compression packages nobody asked for, and on Trio, asyncio.
NOT_FOR_PRODUCING = (
    "asyncio",
    "concurrent.futures",
    "adiskq._async.consumer",
    "adiskq._async.group",
    "adiskq._async.notify",
    "adiskq._storage.api",
    "adiskq._storage.group_api",
    "adiskq._storage.group_admin",
    "adiskq._storage.leases",
    "adiskq._storage.offsets",
    "adiskq.cli",
    "adiskq.kafka",
    "adiskq.spark",
    "adiskq.serializers",
    "bz2",
    "lzma",
    "shutil",
    "opentelemetry",
    "zstandard",
)


def _modules_one_push_loads(stream_path: str, backend: str) -> set[str]:
    return set(run_snippet(PUSH_ONE, stream_path, backend).split())


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_push_imports_nothing_a_producer_does_not_use(stream_path: str, backend: str) -> None:
    """``import adiskq`` and one push load (beyond what the event loop loads) none of the read,
    group, CLI, Kafka or compression modules, nor on Trio asyncio."""
    loaded = _modules_one_push_loads(stream_path, backend)
    assert "adiskq._async.producer" in loaded  # the push really ran through the producer
    assert sorted(loaded.intersection(NOT_FOR_PRODUCING)) == []
