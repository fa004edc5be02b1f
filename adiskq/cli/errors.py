"""The command line's error boundary: every failure becomes one line and an exit status.

Exit status 0 is success, 1 an error (the stream, the disk, the files), 2 misuse (click's own usage
errors). No traceback reaches the user unless ``adiskq --debug`` asked for it. A reader whose
output pipe closed (``adiskq read S | head -1``) stops quietly with status 0: that is how a pipe
says it has seen enough. Ctrl-C ends with status 130, as a shell expects, and says nothing more.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import sys
from collections.abc import Iterator
from typing import Final

import click

__all__ = ["EXIT_ERROR", "EXIT_INTERRUPTED", "Failure", "failure_for", "internal_error", "pacify_stdout", "unwrap"]

EXIT_ERROR: Final = 1
EXIT_INTERRUPTED: Final = 130


class Failure(click.ClickException):
    """An error that is the user's to fix: one line on stderr, exit status 1."""

    exit_code = EXIT_ERROR


def unwrap(error: BaseException) -> BaseException:
    """The one exception that matters in (possibly nested) exception groups from task groups."""
    while isinstance(error, BaseExceptionGroup):
        leaves = list(_leaves(error))
        # An interrupt or a closed pipe explains the rest (sibling tasks were cancelled by it).
        for kind in (KeyboardInterrupt, BrokenPipeError):
            for leaf in leaves:
                if isinstance(leaf, kind):
                    return leaf
        error = leaves[0]
    return error


def _leaves(group: BaseExceptionGroup[BaseException]) -> Iterator[BaseException]:
    for error in group.exceptions:
        if isinstance(error, BaseExceptionGroup):
            yield from _leaves(error)
        else:
            yield error


def pacify_stdout() -> None:
    """Point stdout at /dev/null, so flushing what is left at exit cannot raise BrokenPipeError again."""
    # In click's test runner stdout is in memory: fileno() raises io.UnsupportedOperation (an OSError).
    with contextlib.suppress(OSError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _owner_of(path: str | None) -> str | None:
    if not path:
        return None
    try:
        uid = os.stat(path).st_uid
    except OSError:
        return None
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _describe_os_error(error: OSError) -> str:
    where = f" ({error.filename})" if error.filename else ""
    reason = error.strerror or str(error)
    if isinstance(error, PermissionError):
        owner = _owner_of(os.fspath(error.filename) if error.filename else None)
        whose = f" (they belong to {owner})" if owner else ""
        return (
            f"permission denied{where}: run adiskq as a user who may read (and, to write, change) the "
            f"stream's files{whose}, or change their permissions"
        )
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return (
            f"the disk is full{where}: free some space, or delete old data with "
            "`adiskq vacuum PATH --max-bytes SIZE` (it frees whole segments)"
        )
    if error.errno == errno.ELOOP:
        link = where.strip(" ()")
        return f"{link} is a symbolic link: adiskq never follows links inside a stream; put the file itself there"
    return f"{reason}{where}"


def locked_failure(path: str, holder: str | None, how: str, advice: str) -> Failure:
    """A stream a producer holds: ``stream 'P' <how> (pid .. on host ..)<advice>``."""
    return Failure(f"stream {path!r} {how} ({holder or 'another producer'}){advice}")


def failure_for(error: BaseException) -> click.ClickException | None:
    """The one-line failure to show for ``error``, or None if it is not one we can explain."""
    from .._errors import Error, LockTimeoutError, StreamLockedError, StreamNotFoundError
    from .._extras import MissingExtraError

    if isinstance(error, click.ClickException):
        return error
    if isinstance(error, MissingExtraError):
        return click.UsageError(str(error))  # the install is the user's to fix: status 2
    if isinstance(error, StreamNotFoundError):
        return Failure(
            f"no adiskq stream at {error.path!r} ({error.why}): check the path; `adiskq write PATH` creates a stream"
        )
    if isinstance(error, LockTimeoutError):
        return Failure(str(error))  # names the holder, which is alive but not progressing
    if isinstance(error, StreamLockedError):
        if error.held_shared:
            return locked_failure(
                error.path,
                error.holder,
                "is being written by shared producers",
                ": pass --shared to write beside them, or run this again once they have closed",
            )
        return locked_failure(
            error.path,
            error.holder,
            "is locked by a producer",
            ": a stream has one writer at a time unless every writer is shared (--shared). Stop that "
            "producer, or run this again once it has closed",
        )
    if isinstance(error, Error):
        return Failure(str(error))
    if isinstance(error, OSError):
        return Failure(_describe_os_error(error))
    return None


def internal_error(error: BaseException) -> Failure:
    """What a bug looks like to the user: still one line, and how to see more."""
    return Failure(
        f"unexpected {type(error).__name__}: {error}. This is a bug in adiskq: run the command again with "
        "`adiskq --debug ...` to see the traceback, and report it"
    )
