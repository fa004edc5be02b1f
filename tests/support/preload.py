"""Import every adiskq module now, while this process may still read the checkout.

Tests that drop to the ``nobody`` user run code that imports modules lazily (the CLI imports its
commands' modules when they run). A checkout may lie where ``nobody`` cannot go (a ``mktemp -d``
folder, root's home), so those imports must happen before the privileges go.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import adiskq


def import_all_of_adiskq() -> None:
    """Import every module of the adiskq package except the Spark data source (which needs pyspark)."""
    for module in pkgutil.walk_packages(adiskq.__path__, "adiskq."):
        if module.name == "adiskq.spark" or module.name.startswith("adiskq.spark."):
            continue
        importlib.import_module(module.name)


def only_this_copy() -> None:
    """Drop the import hooks of editable installs (``pip install -e``) from ``sys.meta_path``.

    After a process gives up root, a module not imported yet is looked for in ``adiskq.__path__``;
    when that copy cannot be read, an editable install's hook would find the module in the checkout
    it was installed from instead, which hides a checkout nobody may read in one place and breaks in
    another. Without the hooks, what is imported after the drop comes from this copy or fails.
    """
    sys.meta_path[:] = [finder for finder in sys.meta_path if not _is_editable_hook(finder)]


def _is_editable_hook(finder: object) -> bool:
    module = getattr(finder, "__module__", "") or type(finder).__module__
    return module.startswith("__editable__")
