"""Where the checkout's parts are, for tests in any folder under tests/."""

from __future__ import annotations

import os

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT_DIR = os.path.dirname(TESTS_DIR)
