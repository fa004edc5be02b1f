"""Import every adiskq module now, while this process may still read the checkout.

Tests that drop to the ``nobody`` user run code that imports modules lazily (the CLI imports its
commands' modules when they run). A checkout may lie where ``nobody`` cannot go (a ``mktemp -d``
folder, root's home), so those imports must happen before the privileges go.
"""

from __future__ import annotations

import importlib
import pkgutil

import adiskq


def import_all_of_adiskq() -> None:
    """Import every module of the adiskq package except the Spark data source (which needs pyspark)."""
    for module in pkgutil.walk_packages(adiskq.__path__, "adiskq."):
        if module.name == "adiskq.spark" or module.name.startswith("adiskq.spark."):
            continue
        importlib.import_module(module.name)
