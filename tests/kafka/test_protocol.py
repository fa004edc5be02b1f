"""The gateway's answers at the protocol level: versions, unknown requests, bad frames, limits."""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import time

from conftest import call, raw_request, receive_exactly
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.metadata.v1.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import TopicName

from adiskq.kafka._registry import API_TABLE
from adiskq.kafka.wire.protocol import request_schema, response_schema


def assert_closed(sock: socket.socket) -> None:
    """The gateway closed the connection (a reset counts: it closed with unread bytes pending)."""
    with contextlib.suppress(ConnectionResetError):
        assert sock.recv(1) == b""


def test_every_registered_version_has_kios_request_and_response_schemas() -> None:
    """Each API and version the gateway advertises has a request and a response schema to decode and encode it."""
    missing = [
        (api.name, version)
        for api in API_TABLE.values()
        for version in range(api.min_version, api.max_version + 1)
        if request_schema(api.key, version) is None or response_schema(api.key, version) is None
    ]
    assert missing == []


def test_api_versions_lists_exactly_the_registered_ranges(gateway) -> None:
    """ApiVersions v3 answers every API the gateway registered, with its version range."""
    response = call(gateway.gateway.port, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    got = {entry.api_key: (entry.min_version, entry.max_version) for entry in response.api_keys}
    assert got == {api.key: (api.min_version, api.max_version) for api in API_TABLE.values()}
    assert got[0] == (3, 12)  # Produce
    # Kafka 4's transaction version 2 (KIP-890), finalized as Kafka 4.4 finalizes it
    assert [(f.name, f.min_version_level, f.max_version_level) for f in response.finalized_features] == [
        ("transaction.version", 2, 2)
    ]
    assert [(f.name, f.min_version, f.max_version) for f in response.supported_features] == [
        ("transaction.version", 0, 2)
    ]
    assert response.finalized_features_epoch >= 0


def test_api_versions_in_an_unknown_version_answers_v0_with_the_ranges(gateway) -> None:
    """A client's too-new ApiVersions gets UNSUPPORTED_VERSION in the v0 layout with the ranges, as Kafka answers."""
    payload = raw_request(gateway.gateway.port, 18, 99)
    correlation_id, error_code, count = struct.unpack_from(">ihi", payload)
    assert (correlation_id, error_code) == (7, 35)
    entries = [struct.unpack_from(">hhh", payload, 10 + 6 * i) for i in range(count)]
    assert (18, 0, 4) in entries
    assert len(payload) == 10 + 6 * count


def test_unknown_api_key_answers_unsupported_version(gateway) -> None:
    """A request the gateway does not serve is answered with UNSUPPORTED_VERSION, not a dropped connection."""
    payload = raw_request(gateway.gateway.port, 99, 0)
    assert struct.unpack(">ih", payload) == (7, 35)
    payload = raw_request(gateway.gateway.port, 27, 0)  # WriteTxnMarkers: only brokers send it
    assert struct.unpack(">ih", payload) == (7, 35)


def test_topic_names_never_leave_the_root(gateway) -> None:
    """Metadata for illegal names answers INVALID_TOPIC_EXCEPTION and creates nothing anywhere."""
    names = ["../escape", "..", ".", "a/b", "x" * 250, "", "naïve"]
    request = MetadataRequest(topics=tuple(MetadataRequestTopic(name=TopicName(n)) for n in names))
    response = call(gateway.gateway.port, request)
    assert [(t.name, t.error_code.value) for t in response.topics] == [(n, 17) for n in names]
    assert not os.path.exists(os.path.join(os.path.dirname(gateway.root), "escape"))
    assert not os.path.exists(os.path.join(gateway.root, "a"))


def test_malformed_request_closes_only_that_connection(gateway) -> None:
    """A request that does not parse closes its connection; the gateway goes on serving others."""
    header = struct.pack(">hhih", 3, 1, 5, -1)
    with socket.create_connection(("127.0.0.1", gateway.gateway.port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(header) + 3) + header + b"\x7f\xff\xff")
        assert_closed(sock)
    response = call(gateway.gateway.port, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    assert response.error_code.value == 0


def test_idle_and_half_sent_connections_do_not_stall_others(gateway) -> None:
    """Hundreds of idle connections and one stuck mid-frame leave a new client's request answered at once."""
    idle = [socket.create_connection(("127.0.0.1", gateway.gateway.port), timeout=10) for _ in range(200)]
    try:
        half = idle[0]
        half.sendall(struct.pack(">i", 1000) + b"\x00\x03")  # a frame that never completes
        started = time.monotonic()
        response = call(gateway.gateway.port, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        assert response.error_code.value == 0
        assert time.monotonic() - started < 5
    finally:
        for sock in idle:
            sock.close()


def test_request_over_the_limit_is_refused_before_it_is_read(gateway) -> None:
    """A frame announcing more than max_request_bytes gets MESSAGE_TOO_LARGE from its header alone."""
    limit = gateway.gateway.max_request_bytes
    header = struct.pack(">hhih", 0, 9, 42, -1)
    with socket.create_connection(("127.0.0.1", gateway.gateway.port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", limit + 1) + header)  # the rest is never sent
        size = struct.unpack(">i", receive_exactly(sock, 4))[0]
        assert struct.unpack(">ih", receive_exactly(sock, size)) == (42, 10)
        assert_closed(sock)


def test_a_refused_record_is_answered_in_every_produce_version(gateway, topic: str) -> None:
    """A record the gateway refuses (a timestamp past 2262, which no nanosecond clock holds) gets
    INVALID_TIMESTAMP in Produce v3 (no record-error list) to v12."""
    import datetime as dt
    import importlib

    from adiskq.kafka.wire.batch import KafkaRecord, encode_batch

    batch = encode_batch(base_offset=0, records=[KafkaRecord(0, 10**13, b"k", b"v", [])], base_timestamp_ms=10**13)
    for version in range(3, 13):
        schema = importlib.import_module(f"kio.schema.produce.v{version}.request")
        request = schema.ProduceRequest(
            acks=1,
            timeout=dt.timedelta(seconds=5),
            topic_data=(
                schema.TopicProduceData(
                    name=TopicName(topic), partition_data=(schema.PartitionProduceData(index=0, records=batch),)
                ),
            ),
        )
        call(gateway.gateway.port, MetadataRequest(topics=(MetadataRequestTopic(name=TopicName(topic)),)))
        response = call(gateway.gateway.port, request)
        (answer,) = response.responses[0].partition_responses
        assert answer.error_code == 32, version  # INVALID_TIMESTAMP
        assert answer.base_offset == -1


def test_a_produce_naming_a_topic_twice_is_answered_per_entry(gateway, topic: str) -> None:
    """A Produce listing the same topic in two entries gets two topic entries back, in order, each with its offsets."""
    import datetime as dt

    from kio.schema.produce.v3.request import PartitionProduceData, ProduceRequest, TopicProduceData

    from adiskq.kafka.wire.batch import KafkaRecord, encode_batch

    batch = encode_batch(base_offset=0, records=[KafkaRecord(0, 1, b"k", b"v", [])], base_timestamp_ms=1)
    entry = TopicProduceData(name=TopicName(topic), partition_data=(PartitionProduceData(index=0, records=batch),))
    call(gateway.gateway.port, MetadataRequest(topics=(MetadataRequestTopic(name=TopicName(topic)),)))
    response = call(
        gateway.gateway.port, ProduceRequest(acks=1, timeout=dt.timedelta(seconds=5), topic_data=(entry, entry))
    )
    assert [(answer.name, len(answer.partition_responses)) for answer in response.responses] == [(topic, 1), (topic, 1)]
    offsets = [answer.partition_responses[0].base_offset for answer in response.responses]
    assert offsets == [0, 1]
