"""bench_codec.py runs in its quick mode, so the script never rots (no timing is asserted here)."""

from __future__ import annotations

import os
import subprocess
import sys

from support.bench import run_quick
from support.paths import ROOT_DIR

BENCHMARKS = os.path.join(ROOT_DIR, "benchmarks")


def test_codec_benchmark_quick() -> None:
    """--quick names the core it measured and gives ns per record for the codec beside a memcpy."""
    result = run_quick("bench_codec.py", timeout=60)
    assert result.stdout.startswith("core: ")
    for line in ("encode_batch", "decode_messages", "memcpy of the batch", "ns/record", "× memcpy"):
        assert line in result.stdout


def test_codec_benchmark_child_runs_the_batches_callgrind_counts() -> None:
    """The child that --instructions runs under callgrind does its set-up and batches, and exits cleanly."""
    for name in ("", "decode_messages"):
        result = subprocess.run(
            [sys.executable, os.path.join(BENCHMARKS, "bench_codec.py"), "--child", name],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
