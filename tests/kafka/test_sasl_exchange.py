"""The SASL exchange without sockets: refusals for bad tokens, and no exception for any bytes."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adiskq.kafka import group_errors as err
from adiskq.kafka.credentials import MECHANISMS, Credentials, make_secret
from adiskq.kafka.sasl import SaslServer

CREDENTIALS = Credentials({"alice": {name: make_secret(h, "pw", iterations=4096) for name, h in MECHANISMS.items()}})


def server(mechanism: str) -> SaslServer:
    sasl = SaslServer(CREDENTIALS)
    assert sasl.handshake(mechanism) == err.NONE
    return sasl


def test_authenticate_before_handshake_is_illegal() -> None:
    """A token before SaslHandshake is ILLEGAL_SASL_STATE."""
    assert SaslServer(CREDENTIALS).step(b"\0alice\0pw").error == err.ILLEGAL_SASL_STATE


def test_unknown_mechanism_is_unsupported() -> None:
    """A mechanism not offered is UNSUPPORTED_SASL_MECHANISM."""
    assert SaslServer(CREDENTIALS).handshake("GSSAPI") == err.UNSUPPORTED_SASL_MECHANISM


@pytest.mark.parametrize(
    "token",
    [b"\0alice\0pw", b"alice\0alice\0pw"],
    ids=["no authzid", "authzid of the same user"],
)
def test_plain_accepts_the_password(token: bytes) -> None:
    """PLAIN with the right password authenticates (checked against the SCRAM keys)."""
    sasl = server("PLAIN")
    assert sasl.step(token).error == err.NONE
    assert sasl.user == "alice"


@pytest.mark.parametrize(
    "token",
    [b"\0alice\0nope", b"\0bob\0pw", b"mallory\0alice\0pw", b"alice pw", b"\0alice\0\xff"],
    ids=["wrong password", "unknown user", "authzid of another user", "no separators", "not UTF-8"],
)
def test_plain_refusals(token: bytes) -> None:
    """PLAIN refuses wrong passwords, unknown users, other authzids and malformed tokens."""
    sasl = server("PLAIN")
    assert sasl.step(token).error == err.SASL_AUTHENTICATION_FAILED
    assert not sasl.authenticated


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize(
    "final",
    [
        "c=biws,r={nonce}",  # no proof
        "c=biws,r=other,p=" + base64.b64encode(bytes(32)).decode(),  # a nonce the server never gave
        "c=biws,r={nonce},p=***",  # proof not base64
        "c=biws,r={nonce},p=" + base64.b64encode(bytes(3)).decode(),  # proof of the wrong length
        "c=biws,r={nonce},p=" + base64.b64encode(bytes(64)).decode(),  # a wrong proof
    ],
    ids=["no proof", "foreign nonce", "not base64", "short proof", "wrong proof"],
)
def test_scram_refusals(mechanism: str, final: str) -> None:
    """SCRAM's client-final message is refused unless it carries the server's nonce and a valid proof."""
    sasl = server(mechanism)
    first = sasl.step(b"n,,n=alice,r=abc")
    assert first.error == err.NONE
    nonce = first.token.decode().split(",")[0][2:]
    assert nonce.startswith("abc")
    answer = sasl.step(final.format(nonce=nonce).encode())
    assert answer.error == err.SASL_AUTHENTICATION_FAILED
    assert not sasl.authenticated


def test_scram_unknown_user_gets_a_salt_all_the_same() -> None:
    """An unknown user is answered like a known one (a made-up salt), so the answer does not tell."""
    sasl = server("SCRAM-SHA-256")
    answer = sasl.step(b"n,,n=nobody,r=abc")
    assert answer.error == err.NONE
    assert b",s=" in answer.token


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
@given(tokens=st.lists(st.binary(max_size=200), min_size=1, max_size=3))
def test_any_tokens_are_answered_never_raised(mechanism: str, tokens: list[bytes]) -> None:
    """Whatever bytes a client sends, each step answers (an error code or a token) without raising."""
    sasl = server(mechanism)
    for token in tokens:
        answer = sasl.step(token)
        assert answer.error in (err.NONE, err.SASL_AUTHENTICATION_FAILED, err.ILLEGAL_SASL_STATE)
