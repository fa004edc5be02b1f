"""What several handlers share: zero throttle time, error codes and messages for the library's exceptions."""

from __future__ import annotations

import datetime as dt
import os
from typing import TYPE_CHECKING, Final

from kio.schema.errors import ErrorCode

from ..._errors import (
    DiskUsageRefusedError,
    InvalidArgumentError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    StreamLockedError,
    StreamNotFoundError,
)
from .._open_files import TooManyPartitionsError
from .._topics import InvalidTopicError

if TYPE_CHECKING:
    from .._core import GatewayCore

__all__ = ["NO_THROTTLE", "error_code_for", "error_message_for"]

NO_THROTTLE: Final = dt.timedelta(0)


def error_code_for(error: BaseException) -> ErrorCode:
    """Kafka's error code for a failure of the library (UNKNOWN_SERVER_ERROR for the unforeseen)."""
    if isinstance(error, InvalidTopicError):
        return ErrorCode.invalid_topic_exception
    if isinstance(error, TooManyPartitionsError):
        # Kafka's controller answers POLICY_VIOLATION for more partitions than it creates at once
        # ("Excessively large number of partitions per request"): not retriable, as this is not.
        return ErrorCode.policy_violation
    if isinstance(error, StreamNotFoundError | InvalidArgumentError):
        return ErrorCode.unknown_topic_or_partition
    if isinstance(error, OffsetOutOfRangeError):
        return ErrorCode.offset_out_of_range
    if isinstance(error, MessageTooLargeError):
        return ErrorCode.message_too_large
    if isinstance(error, StreamLockedError | DiskUsageRefusedError | OSError):
        return ErrorCode.kafka_storage_error  # retriable: the client tries again
    return ErrorCode.unknown_server_error


def error_message_for(gateway: GatewayCore, error: BaseException) -> str:
    """The library's message for ``error`` as a client may read it: without the server's folders.

    The library names the files it speaks of by their full paths, which tell a client how the
    server's disk is laid out; a client knows topics, so a path under the root is named from the
    root on (``orders/partition-0000``), and the root itself as "the gateway's root folder"."""
    message = str(error)
    root = gateway.topics.root
    for seen in dict.fromkeys((root, os.path.realpath(root))):
        message = message.replace(seen + os.sep, "").replace(seen, "the gateway's root folder")
    return message
