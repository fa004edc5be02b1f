"""A producer's memory does not grow with the number of distinct keys it has pushed.

Local stream only: the memory measured is the local key index's (README's capability table:
local stream options, key_index)."""

from __future__ import annotations

import os
import textwrap

import pytest
from support.snippets import run_snippet

# Pushes 1,000 keys (the producer's buffers and caches warm), then starts tracing allocations and
# pushes 20,000 more distinct keys: what is still allocated at the end is what those keys left behind.
PUSH_DISTINCT_KEYS = textwrap.dedent(
    """
    import sys
    import tracemalloc

    import anyio
    import adiskq

    async def main(path):
        async with adiskq.Producer(path, partitions=1) as producer:
            for number in range(1_000):
                await producer.push(b"v", key=b"warm-%08d" % number)
            tracemalloc.start()
            for number in range(20_000):
                await producer.push(b"v", key=b"ord-%08d" % number)
            left, _ = tracemalloc.get_traced_memory()
            tracemalloc.stop()
        print(left)

    anyio.run(main, sys.argv[1], backend=sys.argv[2])
    """
)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("core", ["compiled", "python"])
def test_distinct_keys_leave_no_growing_cache_behind(stream_path: str, backend: str, core: str) -> None:
    """20,000 pushes of distinct keys leave under 1.5 MiB allocated, on either core (a cache of every
    key placed would hold ~180 bytes a key: 3.4 MiB)."""
    env = dict(os.environ)
    env.pop("ADISKQ_NO_EXTENSIONS", None)
    if core == "python":
        env["ADISKQ_NO_EXTENSIONS"] = "1"
    left_bytes = int(run_snippet(PUSH_DISTINCT_KEYS, stream_path, backend, env=env, timeout=120))
    assert left_bytes < 1.5 * 2**20, f"{left_bytes / 2**20:.1f} MiB still allocated after 20,000 distinct keys"
