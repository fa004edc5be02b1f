"""Python code run in a fresh interpreter, for tests that judge what a whole process loads or keeps."""

from __future__ import annotations

import subprocess
import sys


def run_snippet(code: str, *args: str, env: dict[str, str] | None = None, timeout: float = 60) -> str:
    """Run ``code`` (``python -c``) with ``args`` as ``sys.argv[1:]``; its standard output. The run must
    succeed: otherwise the test fails with the snippet's standard error."""
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
