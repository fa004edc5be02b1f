"""What a named ``ConsumerGroup``'s ``retry()`` and ``dead_letter()`` do around its ``GroupRetries``.

``GroupRetries`` (``retries.py``) keeps the retry stream and the dead letters; this module is the
group's side: opening them with the group (its dead-letter folder checked then, not at the first
dead letter), checking that a message may be retried or dead-lettered by this member now, reading
back the stored bytes of a message the group's deserializers decoded, committing the message once
its retry or dead letter is stored — in a shielded scope, so it is stored and committed or neither —
and, when it cannot be stored, holding the partition's commit below the message
(``MessageKeptError``). Due retries go through the group's deserializers here too.

This module is one of the group's own: with ``group.py`` and ``group_partitions.py`` it alone
reaches the group's private state.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.to_thread

from .._errors import (
    ClosedError,
    DeserializationError,
    Error,
    InvalidArgumentError,
    LockTimeoutError,
    MessageKeptError,
    NotAStreamError,
)
from .._sansio import retries as headers
from .._sansio.decoding import MessageDecoder
from .._sansio.values import Message
from .._storage.api import read as read_stored
from .._storage.retries import (
    RetrySettings,
    default_dead_letter_path,
    retry_stream_path,
    save_retry_settings,
    unusable_stream_folder,
)
from .retries import GroupRetries

if TYPE_CHECKING:
    from .group import ConsumerGroup

__all__ = ["dead_letter", "decoded_retries", "open_retries", "retry"]

logger: Final = logging.getLogger("adiskq.group")


def open_retries(group: ConsumerGroup[Any, Any], stream_path: str, name: str) -> None:
    """The member's retries; where its dead letters go is stored when given (``adiskq retries`` reads it)."""
    dead_letter_path = group.dead_letter_path or default_dead_letter_path(stream_path, name)
    # Checked now, not at the first dead letter or retry: one that cannot be stored fails late.
    why = unusable_stream_folder(dead_letter_path, create=group.dead_letter_path is not None)
    if why is not None:
        raise InvalidArgumentError(
            f"dead_letter_path={dead_letter_path!r} cannot hold the group's dead-letter stream: {why}. Give a "
            "missing or empty folder (created with the first dead letter) or an adiskq stream"
        )
    retry_path = retry_stream_path(stream_path, name)
    why = unusable_stream_folder(retry_path, create=False)
    if why is not None:
        raise NotAStreamError(retry_path, f"the group's retry stream: {why}; move it away")
    if group.max_attempts is not None or group.dead_letter_path is not None:
        save_retry_settings(stream_path, name, RetrySettings(dead_letter_path, group.max_attempts))
    group._retries = GroupRetries(
        stream_path,
        name,
        max_attempts=group.max_attempts,
        dead_letter_path=dead_letter_path,
        commit_interval=group.commit_interval,
    )


async def retry(
    group: ConsumerGroup[Any, Any], message: Message[Any, Any], *, delay: float, reason: str | None
) -> None:
    """``group.retry(message, delay=..., reason=...)`` (its docstring says what it promises)."""
    retries = _retrying(group, message, "retry()")
    if isinstance(delay, bool) or not isinstance(delay, int | float) or not 0 <= delay < 10**9:
        raise InvalidArgumentError(f"delay={delay!r}: give the seconds to wait before delivering again (0 or more)")
    if reason is not None and not isinstance(reason, str):
        raise TypeError(f"reason is text (str) or None, not {type(reason).__name__}")
    stored = await _as_stored(group, message)
    if group.max_attempts is not None and message.attempt >= group.max_attempts:
        why = f"delivered {message.attempt} times (max_attempts={group.max_attempts})"
        await _dead_letter(group, retries, message, stored, why if reason is None else f"{reason}; {why}")
        return
    assert group._stream is not None
    with anyio.CancelScope(shield=True):  # stored and committed, or neither
        try:
            await retries.retry(stored, delay=float(delay), reason=reason, partitions=group._known_partitions)
        except (OSError, Error) as error:
            raise _kept(group, message, "retry()", f"the group's retry stream ({retries.path})", error) from error
        _let_go(group, message)
        group.commit(message)
    group._waiter.wake()  # a read waiting in another task looks again, with the new due time


async def dead_letter(
    group: ConsumerGroup[Any, Any], message: Message[Any, Any] | DeserializationError, *, reason: str
) -> None:
    """``group.dead_letter(message, reason=...)`` (its docstring says what it promises)."""
    if not isinstance(reason, str):
        raise TypeError(f"reason is text (str), not {type(reason).__name__}")
    if isinstance(message, DeserializationError):
        await _dead_letter_undecodable(group, message, reason)
        return
    retries = _retrying(group, message, "dead_letter()")
    await _dead_letter(group, retries, message, await _as_stored(group, message), reason)


def decoded_retries(decoder: MessageDecoder | None, due: list[Message]) -> list[Message[Any, Any]]:
    """Due retries through the group's deserializers, as their first delivery was (the same
    stored bytes, so the same functions decode them again)."""
    if decoder is None or not due:
        return due  # no deserializers: the keys and values are the stored bytes
    decoded, failure = decoder.decode(due)
    if failure is not None:
        failed = due[len(decoded)]
        raise DeserializationError(
            f"the {failure.which} failed on a retry of message {failed.offset} of partition {failed.partition} "
            f"({type(failure.error).__name__}: {failure.error}), which it decoded when the message was first "
            "delivered; the retry is delivered again when this member restarts",
            partition=failed.partition,
            offset=failed.offset,
        )
    return decoded


def _retrying(group: ConsumerGroup[Any, Any], message: Message[Any, Any], what: str) -> GroupRetries:
    """The member's retries, if ``message`` may be retried or dead-lettered by it now."""
    if group.closed:
        raise ClosedError(f"this consumer group was closed; {what} before closing it")
    retries = group._retries
    if retries is None:
        raise InvalidArgumentError(f"{what} needs a named group: ConsumerGroup(path, name='...')")
    if not isinstance(message, Message):
        raise TypeError(f"{what} takes a Message the group delivered, not {type(message).__name__}")
    if message.partition not in group._followers:
        raise InvalidArgumentError(
            f"partition {message.partition} is not held by this member of group {group.name!r} (it went to "
            "another member, or never came here): its holder delivers the message again"
        )
    if retries.finished(message) or (
        headers.retry_offset(message) is None and group._ledger.committed.get(message.partition, -1) > message.offset
    ):
        raise InvalidArgumentError(
            f"{what} of message {message.offset} of partition {message.partition}, which is committed already "
            "(by commit() of it or of a later message of its partition, or by an earlier retry() or "
            "dead_letter()): a committed message is never delivered again. Call retry() or dead_letter() "
            "instead of commit(), not after it"
        )
    return retries


async def _dead_letter_undecodable(group: ConsumerGroup[Any, Any], error: DeserializationError, reason: str) -> None:
    """Dead-letter the stored bytes of the message ``error`` names, and read on past it."""
    partition, offset = error.partition, error.offset
    if group.closed:
        raise ClosedError("this consumer group was closed; dead_letter() before closing it")
    stored: Message[Any, Any] = await anyio.to_thread.run_sync(read_stored, group.path, partition, offset)
    retries = _retrying(group, stored, "dead_letter()")
    await _dead_letter(group, retries, stored, stored, reason)
    follower = group._followers.get(partition)
    if follower is not None and follower.position <= offset:
        group.seek(partition, offset + 1)  # the failed read left it on the message


async def _as_stored(group: ConsumerGroup[Any, Any], message: Message[Any, Any]) -> Message[Any, Any]:
    """``message`` with its key and value as the stream stores them: with deserializers the group
    delivers what they made, and a retry or a dead letter must keep the stored bytes, read back
    from the stream (``OffsetOutOfRangeError`` if retention deleted them meanwhile)."""
    delivered: Message[Any, Any] = message
    if group._decoder is None:
        return delivered
    stored = await anyio.to_thread.run_sync(read_stored, group.path, message.partition, message.offset)
    return delivered._replace(key=stored.key, value=stored.value)


async def _dead_letter(
    group: ConsumerGroup[Any, Any],
    retries: GroupRetries,
    message: Message[Any, Any],
    stored: Message[Any, Any],
    reason: str,
) -> None:
    with anyio.CancelScope(shield=True):  # stored and committed, or neither
        try:
            await retries.dead_letter(stored, reason=reason)
        except (OSError, Error) as error:
            where = f"dead_letter_path={retries.dead_letter_path!r}"
            raise _kept(group, message, "dead_letter()", where, error) from error
        _let_go(group, message)
        group.commit(message)
        # Stored at once, as the dead letter was: a crash now must not send it there twice.
        try:
            await group._store_partitions([message.partition], carry_starts=False, wait_seconds=0)
        except LockTimeoutError:
            pass  # another member stores now: this commit goes with the next store
        except OSError as error:
            logger.warning("group %r: the commit after a dead letter is stored later: %s", group.name, error)


def _kept(
    group: ConsumerGroup[Any, Any], message: Message[Any, Any], what: str, where: str, error: BaseException
) -> MessageKeptError:
    """``what`` failed to store ``message`` in ``where``: hold the partition's commit below the
    message (it is read again unless a later try succeeds) and say so."""
    if headers.retry_offset(message) is None:  # a retry's own record stays unfinished by itself
        group._ledger.hold_below(message.partition, message.offset)
    group._waiter.wake()
    return MessageKeptError(
        f"{what} could not store message {message.offset} of partition {message.partition} in {where} "
        f"({type(error).__name__}: {error}). The message is kept: the group's commit of partition "
        f"{message.partition} stays below it until a dead_letter() or retry() of it succeeds, and if this "
        "member stops first, the message is delivered again",
        partition=message.partition,
        offset=message.offset,
        parameter="dead_letter_path" if what == "dead_letter()" else "retry stream",
        errno=error.errno if isinstance(error, OSError) else None,
    )


def _let_go(group: ConsumerGroup[Any, Any], message: Message[Any, Any]) -> None:
    """A dead letter or retry of ``message`` succeeded: a hold a failed one made ends."""
    if headers.retry_offset(message) is None:
        group._ledger.let_go(message.partition, message.offset)
