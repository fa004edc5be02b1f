"""Builds adiskq's compiled core (``adiskq._compiled``, C sources in ``adiskq/_csrc``).

Everything else about the package is declared in ``pyproject.toml``; this file exists because an
extension module and the message for a machine that cannot compile it need code. With
``ADISKQ_NO_EXTENSIONS=1`` in the environment nothing is compiled and adiskq runs its pure-Python core.
"""

from __future__ import annotations

import glob
import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

NO_EXTENSIONS = os.environ.get("ADISKQ_NO_EXTENSIONS", "") not in ("", "0")
# The module (module.c, core.h) at the top; the log's core in log/, the Kafka gateway's in kafka/.
SOURCES = sorted(glob.glob("adiskq/_csrc/**/*.c", recursive=True))
HEADERS = sorted(glob.glob("adiskq/_csrc/**/*.h", recursive=True))

CANNOT_COMPILE = """
adiskq's compiled core (adiskq/_csrc/**/*.c) could not be compiled: {error}

It needs a C compiler and the Python headers (on Debian: apt-get install gcc python3-dev).
To install adiskq without it, running its pure-Python core (same files, slower), set
ADISKQ_NO_EXTENSIONS=1 in the environment of the install, e.g.:

    ADISKQ_NO_EXTENSIONS=1 pip install adiskq
"""


class BuildCore(build_ext):
    """``build_ext`` that turns a failed compile into a message saying what to do."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as error:  # the compiler missing, headers missing, a compile error
            raise SystemExit(CANNOT_COMPILE.format(error=error)) from error

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as error:
            raise SystemExit(CANNOT_COMPILE.format(error=error)) from error


setup(
    ext_modules=[]
    if NO_EXTENSIONS
    else [
        Extension(
            "adiskq._compiled",
            sources=SOURCES,
            depends=HEADERS,
            extra_compile_args=["-std=c11", "-O2", "-Wall", "-Wextra", "-Wno-missing-field-initializers"],
        )
    ],
    cmdclass={"build_ext": BuildCore},
)
