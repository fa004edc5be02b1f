"""The ``adiskq`` command line: ``write``, ``read``, ``stats``, ``vacuum``, ``check``, ``groups``, ``offsets``.

It sits on top of the library (the synchronous storage layer and the async producer and consumers).
Run ``adiskq --help``, or ``python -m adiskq --help``.
"""

from .app import cli as cli
from .app import main as main

__all__ = ["cli", "main"]
