"""Requests whose array counts, string or bytes lengths cannot fit in the bytes they carry: refused
with ProtocolError naming the field, before kio sizes anything from them (a count kio trusted could
make it ask for hundreds of GB and abort the process). Each decode runs in a child process, so an
abort fails the test instead of ending the test run."""

from __future__ import annotations

import datetime as dt
import io
import pathlib
import socket
import struct
import subprocess
import sys

import pytest
from conftest import call
from gateway_process import GatewayProcess
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.serial import entity_writer
from kio.static.primitive import i8, i32
from test_request_fuzz import _FRAMES

import adiskq.kafka.apis  # noqa: F401 (registers the handlers in API_TABLE)
from adiskq.kafka._registry import API_TABLE
from adiskq.kafka.wire.protocol import ProtocolError, decode_request, parse_header, request_schema
from adiskq.kafka.wire.request_guard import request_guard

HUGE_UVARINT = "ffffffff0f"  # 2**32 - 1: a compact count or length of 2**32 - 2


def _message(api_key: int, version: int, flexible: bool, body_hex: str) -> bytes:
    """A request message (no size prefix): header with client id "fuzz", then the body."""
    header = struct.pack(">hhih", api_key, version, 1, 4) + b"fuzz" + (b"\0" if flexible else b"")
    return header + bytes.fromhex(body_hex)


_DECODE = """
import sys
from adiskq.kafka.wire.protocol import ProtocolError, decode_request, parse_header
message = sys.stdin.buffer.read()
header, at = parse_header(message)
try:
    decode_request(header, message, at)
except ProtocolError as error:
    print("ProtocolError:", error)
else:
    print("decoded")
"""


def _decode_in_child(message: bytes) -> str:
    """What decoding ``message`` gives, in a child process: its output, or the way it died."""
    child = subprocess.run([sys.executable, "-c", _DECODE], input=message, capture_output=True, timeout=60)
    assert child.returncode == 0, f"decoding killed the process ({child.returncode}): {child.stderr[-400:]!r}"
    return child.stdout.decode().strip()


# (what, message, the field the error names)
HOSTILE = [
    (
        "Metadata v12 topics, a compact count of 2**35",
        bytes.fromhex("0003000c00000001000466757a7a00ffffffff6f001400000000"),
        "MetadataRequest.topics[]: count",
    ),
    ("Metadata v1 topics, a legacy count", _message(3, 1, False, "6f00140000000000"), "MetadataRequest.topics[]"),
    (
        "Produce v3 partitions, a legacy count nested in a topic",
        _message(0, 3, False, "ffff000100001388000000010001616f00140000000000"),
        "ProduceRequest.topic_data[].partition_data[]",
    ),
    (
        "Produce v9 partitions, a compact count nested in a topic",
        _message(0, 9, True, "00000100001388020261" + HUGE_UVARINT + "00000000"),
        "ProduceRequest.topic_data[].partition_data[]",
    ),
    (
        "Fetch v12 partitions, a compact count nested in a topic",
        _message(1, 12, True, "00" * 25 + "020261" + HUGE_UVARINT + "00000000"),
        "FetchRequest.topics[].partitions[]",
    ),
    (
        "JoinGroup v6 protocols, a compact count of structs",
        _message(11, 6, True, "0267000000000000000001000263" + HUGE_UVARINT + "00000000"),
        "JoinGroupRequest.protocols[]",
    ),
    (
        "OffsetCommit v8 partitions, a compact count nested in a topic",
        _message(8, 8, True, "0267000000000100020261" + HUGE_UVARINT + "00000000"),
        "OffsetCommitRequest.topics[].partitions[]",
    ),
    (
        "Metadata v1 topic name, a legacy string length",
        _message(3, 1, False, "000000017fff61"),
        "MetadataRequest.topics[].name: length",
    ),
    (
        "ApiVersions v3 software name, a compact string length",
        _message(18, 3, True, HUGE_UVARINT + "00"),
        "ApiVersionsRequest.client_software_name: length",
    ),
    (
        "Produce v3 records, a legacy bytes length",
        _message(0, 3, False, "ffff0001000013880000000100016100000001000000007fffffff00"),
        "ProduceRequest.topic_data[].partition_data[].records: length",
    ),
    (
        "Produce v9 records, a compact bytes length",
        _message(0, 9, True, "000001000013880202610200000000" + HUGE_UVARINT + "00"),
        "ProduceRequest.topic_data[].partition_data[].records: length",
    ),
    (
        "Fetch v12 cluster id, a compact string length inside its tagged field",
        _message(1, 12, True, "00" * 25 + "010101010005" + HUGE_UVARINT + "00"),
        "FetchRequest.cluster_id: length",
    ),
    (
        "ApiVersions v3 tagged fields, a count",
        _message(18, 3, True, "02610231" + HUGE_UVARINT + "00"),
        "ApiVersionsRequest tagged fields: count",
    ),
    (
        "ApiVersions v3 tagged field, a size",
        _message(18, 3, True, "026102310105" + HUGE_UVARINT + "00"),
        "ApiVersionsRequest tagged fields: size of tag 5",
    ),
]


@pytest.mark.parametrize(("what", "message", "field"), HOSTILE, ids=[case[0] for case in HOSTILE])
def test_impossible_count_or_length_is_refused_naming_the_field(what: str, message: bytes, field: str) -> None:
    """A count or length larger than the bytes left is a ProtocolError naming the field, not an abort."""
    answer = _decode_in_child(message)
    assert answer.startswith("ProtocolError:"), f"{what}: {answer}"
    assert field in answer, f"{what}: {answer}"
    assert "bytes left in the request" in answer, f"{what}: {answer}"


def _send_hostile(port: int, message: bytes) -> None:
    """Send one frame; read until the gateway closes the connection (which it does on a bad request)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(struct.pack(">i", len(message)) + message)
        try:
            while sock.recv(65536):
                pass
        except ConnectionResetError:
            pass


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_gateway_sent_an_impossible_count_keeps_serving(tmp_path: pathlib.Path, backend: str) -> None:
    """A gateway sent frames with impossible counts closes those connections and serves the next client."""
    root = tmp_path / "root"
    root.mkdir()
    with GatewayProcess(root, backend) as gateway:
        hello = ApiVersionsRequest(client_software_name="t", client_software_version="1")
        with socket.create_connection(("127.0.0.1", gateway.port), timeout=30):  # a client connected throughout
            for _what, message, _field in HOSTILE:
                _send_hostile(gateway.port, message)
                gateway.check_alive()
            response = call(gateway.port, hello)
        assert response.error_code.value == 0  # type: ignore[attr-defined]
        gateway.check_alive()


def test_every_request_the_gateway_serves_has_a_check_that_passes_its_valid_requests() -> None:
    """Each API version the gateway serves has its check built from kio's schema, and the fuzzer's
    valid seed requests pass their checks untouched."""
    checked = 0
    for key, api in API_TABLE.items():
        for version in range(api.min_version, api.max_version + 1):
            schema = request_schema(key, version)
            assert schema is not None, f"{api.name} v{version}"
            request_guard(schema)
            checked += 1
    assert checked > 50
    for message in _FRAMES:
        header, at = parse_header(message)
        schema = request_schema(header.api_key, header.api_version)
        assert schema is not None
        if schema.__header_schema__.__flexible__:
            at += 1  # no tagged fields in the header
        request_guard(schema)(message, at)  # raises nothing


def _null_array_requests() -> list[tuple[str, object, str]]:
    """(what, a kio request with a null where Kafka's schema has an array, the field the error names)."""
    from kio.schema.create_partitions.v3.request import CreatePartitionsRequest
    from kio.schema.create_topics.v7.request import CreateTopicsRequest
    from kio.schema.describe_configs.v4.request import DescribeConfigsRequest
    from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
    from kio.schema.list_offsets.v1.request import ListOffsetsRequest as ListOffsetsV1
    from kio.schema.list_offsets.v7.request import ListOffsetsRequest
    from kio.schema.offset_commit.v2.request import OffsetCommitRequest as OffsetCommitV2
    from kio.schema.offset_commit.v8.request import OffsetCommitRequest
    from kio.schema.offset_fetch.v8.request import OffsetFetchRequest
    from kio.schema.types import BrokerId, GroupId

    seconds = dt.timedelta(seconds=5)
    g = GroupId("g")
    return [
        ("ListOffsets v7", ListOffsetsRequest(replica_id=BrokerId(-1), isolation_level=i8(0), topics=None), "topics"),  # type: ignore[arg-type]
        ("ListOffsets v1", ListOffsetsV1(replica_id=BrokerId(-1), topics=None), "topics"),  # type: ignore[arg-type]
        (
            "OffsetCommit v8",
            OffsetCommitRequest(
                group_id=g, generation_id_or_member_epoch=i32(-1), member_id="", group_instance_id=None, topics=None
            ),  # type: ignore[arg-type]
            "topics",
        ),
        (
            "OffsetCommit v2",
            OffsetCommitV2(
                group_id=g,
                generation_id_or_member_epoch=i32(-1),
                member_id="",
                retention_time=dt.timedelta(milliseconds=-1),
                topics=None,
            ),  # type: ignore[arg-type]
            "topics",
        ),
        ("OffsetFetch v8", OffsetFetchRequest(groups=None, require_stable=False), "groups"),  # type: ignore[arg-type]
        (
            "CreatePartitions v3",
            CreatePartitionsRequest(topics=None, timeout=seconds, validate_only=False),  # type: ignore[arg-type]
            "topics",
        ),
        (
            "DescribeConfigs v4",
            DescribeConfigsRequest(resources=None, include_synonyms=False, include_documentation=False),  # type: ignore[arg-type]
            "resources",
        ),
        ("CreateTopics v7", CreateTopicsRequest(topics=None, timeout=seconds, validate_only=False), "topics"),  # type: ignore[arg-type]
        ("DescribeGroups v5", DescribeGroupsRequest(groups=None, include_authorized_operations=False), "groups"),  # type: ignore[arg-type]
    ]


def _frame_of(request: object) -> bytes:
    """A kio request as a frame's message (header with client id "t", no size prefix)."""
    buffer = io.BytesIO()
    entity_writer(type(request))(buffer, request)  # type: ignore[arg-type]
    header = struct.pack(">hhih", request.__api_key__, request.__version__, 1, 1) + b"t"  # type: ignore[attr-defined]
    if request.__header_schema__.__flexible__:  # type: ignore[attr-defined]
        header += b"\0"
    return header + buffer.getvalue()


NULL_ARRAYS = _null_array_requests()


@pytest.mark.parametrize(("what", "request_", "field"), NULL_ARRAYS, ids=[case[0] for case in NULL_ARRAYS])
def test_null_array_where_kafka_has_none_is_refused_naming_the_field(what: str, request_: object, field: str) -> None:
    """A null array the schema does not allow is a ProtocolError naming it, as Kafka's readers refuse it,
    not a request that reaches its handler as None."""
    message = _frame_of(request_)
    header, at = parse_header(message)
    with pytest.raises(ProtocolError, match=rf"\.{field} is null"):
        decode_request(header, message, at)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_gateway_sent_null_arrays_closes_those_connections_and_logs_no_failure(
    tmp_path: pathlib.Path, backend: str
) -> None:
    """Each request with a null array is answered as Kafka answers it, by closing the connection, with a
    warning in the log and no unhandled exception; the gateway serves the next client."""
    root = tmp_path / "root"
    root.mkdir()
    with GatewayProcess(root, backend) as gateway:
        for what, request_, _field in NULL_ARRAYS:
            message = _frame_of(request_)
            with socket.create_connection(("127.0.0.1", gateway.port), timeout=30) as sock:
                sock.sendall(struct.pack(">i", len(message)) + message)
                assert sock.recv(4) == b"", f"{what}: answered instead of closed"
        hello = ApiVersionsRequest(client_software_name="t", client_software_version="1")
        assert call(gateway.port, hello).error_code.value == 0  # type: ignore[attr-defined]
        log = gateway.log()
        assert "a request failed" not in log, log
        assert "Traceback" not in log, log
        assert log.count("is null, which Kafka's schema does not allow") == len(NULL_ARRAYS), log


def test_kafka_closes_the_connection_on_the_same_null_arrays(kafka_broker) -> None:
    """Apache Kafka answers each of these requests as the gateway does: the connection is closed,
    without an answer (its readers refuse a null where the schema has none)."""
    host, port = kafka_broker.bootstrap.rsplit(":", 1)
    for what, request_, _field in NULL_ARRAYS:
        message = _frame_of(request_)
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            sock.sendall(struct.pack(">i", len(message)) + message)
            assert sock.recv(4) == b"", f"{what}: Kafka answered"
