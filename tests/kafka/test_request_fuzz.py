"""The request decoder, fuzzed: any bytes give a request or ProtocolError, never another exception,
and the gateway keeps serving whatever it is sent. Sampled here; ``-m slow`` runs many more inputs."""

from __future__ import annotations

import datetime as dt
import io
import socket
import struct

import pytest
from conftest import call
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.create_topics.v5.request import CreatableTopic, CreateTopicsRequest
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.list_offsets.v6.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.metadata.v1.request import MetadataRequest as MetadataV1
from kio.schema.metadata.v1.request import MetadataRequestTopic as MetadataTopicV1
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import TopicName
from kio.serial import entity_writer

from adiskq.kafka.wire.batch import KafkaRecord, encode_batch
from adiskq.kafka.wire.protocol import ProtocolError, decode_request, parse_header

_BATCH = encode_batch(base_offset=0, records=[KafkaRecord(0, 1, b"k", b"v", [("h", b"x")])], base_timestamp_ms=1)
_SEEDS = [
    ApiVersionsRequest(client_software_name="fuzz", client_software_version="1"),
    MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name=TopicName("fuzzed")),),
        include_topic_authorized_operations=False,
    ),
    MetadataV1(topics=(MetadataTopicV1(name=TopicName("fuzzed")),)),
    ProduceRequest(
        acks=1,
        timeout=dt.timedelta(seconds=5),
        topic_data=(
            TopicProduceData(name=TopicName("fuzzed"), partition_data=(PartitionProduceData(index=0, records=_BATCH),)),
        ),
    ),
    FetchRequest(
        max_wait=dt.timedelta(0),
        min_bytes=1,
        topics=(
            FetchTopic(
                topic=TopicName("fuzzed"),
                partitions=(FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1024),),
            ),
        ),
        forgotten_topics_data=(),
    ),
    ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=(
            ListOffsetsTopic(
                name=TopicName("fuzzed"), partitions=(ListOffsetsPartition(partition_index=0, timestamp=-1),)
            ),
        ),
    ),
    CreateTopicsRequest(
        topics=(
            CreatableTopic(
                name=TopicName("fuzzed2"), num_partitions=1, replication_factor=1, assignments=(), configs=()
            ),
        ),
        timeout=dt.timedelta(seconds=5),
        validate_only=True,
    ),
    InitProducerIdRequest(transactional_id=None, transaction_timeout=dt.timedelta(seconds=5)),
]


def _frame(request: object) -> bytes:
    """A request message (no size prefix) with its header."""
    body = io.BytesIO()
    entity_writer(type(request))(body, request)  # type: ignore[arg-type]
    header = struct.pack(">hhih", request.__api_key__, request.__version__, 1, 4) + b"fuzz"  # type: ignore[attr-defined]
    if request.__header_schema__.__flexible__:  # type: ignore[attr-defined]
        header += b"\0"
    return header + body.getvalue()


_FRAMES = [_frame(request) for request in _SEEDS]


@st.composite
def mutated_frames(draw: st.DrawFn) -> bytes:
    """A valid request with bytes replaced, inserted or cut, or bytes that are no request at all."""
    if draw(st.booleans()):
        api_key = draw(st.integers(-2, 80))
        version = draw(st.integers(-1, 20))
        return struct.pack(">hhi", api_key, version, 1) + draw(st.binary(max_size=200))
    frame = bytearray(draw(st.sampled_from(_FRAMES)))
    for _ in range(draw(st.integers(0, 6))):
        position = draw(st.integers(0, len(frame) - 1))
        frame[position] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        # A count or length far beyond the frame, legacy (i32, i16) or compact (uvarint), over whatever
        # field is there: one byte in ten changed at random rarely makes one as large.
        position = draw(st.integers(0, len(frame) - 1))
        huge = draw(st.sampled_from([b"\x6f\x00\x14\x00", b"\x7f\xff", b"\xff\xff\xff\x6f", b"\xff\xff\xff\xff\x0f"]))
        frame[position : position + len(huge)] = huge
    if draw(st.booleans()):
        position = draw(st.integers(0, len(frame)))
        frame[position:position] = draw(st.binary(min_size=1, max_size=8))
    if draw(st.booleans()):
        frame = frame[: draw(st.integers(0, len(frame)))]
    return bytes(frame)


def _decode(message: bytes) -> None:
    try:
        header, at = parse_header(message)
        decode_request(header, message, at)
    except ProtocolError:
        pass


# A Metadata v12 request whose topics count asks kio for 240 GB (which aborted the process).
_IMPOSSIBLE_COUNT = bytes.fromhex("0003000c00000001000466757a7a00ffffffff6f001400000000")
# A Fetch v17 (kio has its schema; the gateway serves 4-16): the compiled Fetch reader refused the
# version with a ValueError instead of leaving the request to kio.
_FETCH_V17 = b"\x00\x01\x00\x11\x00\x00\x00\x01\x00\x04fuzz\x00\x05fuzz\x021\x00"


@settings(max_examples=400, deadline=None)
@given(mutated_frames())
@example(_IMPOSSIBLE_COUNT)
@example(_FETCH_V17)
def test_decoder_raises_only_protocol_error(message: bytes) -> None:
    """Any frame decodes to a request or raises ProtocolError (sampled)."""
    _decode(message)


@pytest.mark.slow
@settings(max_examples=50_000, deadline=None)
@given(mutated_frames())
def test_decoder_raises_only_protocol_error_long(message: bytes) -> None:
    """Any frame decodes to a request or raises ProtocolError (many more inputs)."""
    _decode(message)


def _send(port: int, message: bytes) -> None:
    """Send one frame and read whatever comes back until the gateway answers or closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        try:
            sock.sendall(struct.pack(">i", len(message)) + message)
            sock.shutdown(socket.SHUT_WR)
            sock.settimeout(2)  # a fuzzed Fetch may wait long: its answer is not what is tested
            while sock.recv(65536):
                pass
        except OSError:  # the gateway closed the connection first (a reset, or ENOTCONN)
            pass


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(message=mutated_frames())
@example(message=_IMPOSSIBLE_COUNT)
def test_gateway_survives_fuzzed_requests(gateway, message: bytes) -> None:
    """The gateway answers or closes on any frame, and serves the next client as before (sampled)."""
    _send(gateway.gateway.port, message)
    response = call(gateway.gateway.port, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    assert response.error_code.value == 0


def test_a_fetch_with_a_null_topics_array_is_refused_as_a_protocol_error() -> None:
    """A Fetch v12 whose topics array is null (Kafka's schema allows no null there) raises
    ProtocolError naming the field, as every other request the gateway cannot read does."""
    message = (
        b"\x00\x01\x00\x0c\x00\x00\x00\x01\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00fuzz\x00\xff\xff\xff\xff"
        b"\x00\x00\x00\x00\x00\x00\x00\x01\x7f\xff\xff\xff\x00\x00\x00\x01\x00\xff\xff\xff\xff\x02\x07fuzzed"
        b"\x02\x00\x00\x00\x00\xff\xff\xff\xff\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff"
        b"\xff\xff\xff\xff\x00\x00\x04\x00\x00\x00\x01\x01\x00"
    )
    header, at = parse_header(message)
    with pytest.raises(ProtocolError, match=r"FetchRequest\.topics is null"):
        decode_request(header, message, at)
