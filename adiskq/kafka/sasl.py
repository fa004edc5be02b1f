"""One connection's SASL exchange (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) as a state machine.

Sans-IO: SaslHandshake names the mechanism (``handshake``), then each SaslAuthenticate carries one
token (``step``) and gets one back, until the client is authenticated or refused. Tokens:

- PLAIN (RFC 4616): ``authzid NUL user NUL password``; one step.
- SCRAM (RFC 5802, RFC 7677): ``n,,n=user,r=client-nonce`` -> ``r=nonce,s=salt,i=iterations``, then
  ``c=biws,r=nonce,p=proof`` -> ``v=server-signature``; the client's proof is checked against the
  stored key, and the server's signature proves to the client that the server knows the user's keys.

A refusal never says whether the user or the password was wrong.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Final

from . import group_errors as err
from .credentials import MECHANISMS, Credentials

__all__ = ["SUPPORTED_MECHANISMS", "SaslServer", "SaslStep"]

SUPPORTED_MECHANISMS: Final = ("PLAIN", *MECHANISMS)
# A refused login's message, word for word as Kafka's PlainSaslServer and ScramSaslServer answer it.
_PLAIN_REFUSED: Final = "Authentication failed: Invalid username or password"
_SCRAM_REFUSED: Final = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"


@dataclass(frozen=True, slots=True)
class SaslStep:
    """The answer to one SaslAuthenticate token; ``error`` other than NONE ends the connection."""

    error: int
    token: bytes = b""
    message: str | None = None


class SaslServer:
    """The server side of one connection's authentication."""

    def __init__(self, credentials: Credentials, mechanisms: tuple[str, ...] = SUPPORTED_MECHANISMS) -> None:
        self._credentials = credentials
        self.mechanisms = mechanisms
        self.mechanism: str | None = None
        self.user: str | None = None  # set once authenticated
        # (user, client nonce, nonce, client-first-bare + server-first) between the two SCRAM steps.
        self._scram_state: tuple[str, str, str, str] | None = None

    @property
    def derives_key(self) -> bool:
        """True when the next ``step`` derives a key from a password (PLAIN: a PBKDF2, milliseconds of
        CPU), which the gateway runs off its event loop."""
        return self.mechanism == "PLAIN" and not self.authenticated

    @property
    def authenticated(self) -> bool:
        """True once the client proved who it is."""
        return self.user is not None

    def handshake(self, mechanism: str) -> int:
        """A SaslHandshake: NONE if the mechanism is enabled, else UNSUPPORTED_SASL_MECHANISM."""
        if self.mechanism is not None:
            return err.ILLEGAL_SASL_STATE
        if mechanism not in self.mechanisms:
            return err.UNSUPPORTED_SASL_MECHANISM
        self.mechanism = mechanism
        return err.NONE

    def step(self, token: bytes) -> SaslStep:
        """One SaslAuthenticate token."""
        if self.mechanism is None or self.authenticated:
            return SaslStep(err.ILLEGAL_SASL_STATE, message="SaslAuthenticate without a SaslHandshake before it")
        if self.mechanism == "PLAIN":
            return self._plain(token)
        if self._scram_state is None:
            return self._scram_first(token)
        return self._scram_final(token)

    def _refuse(self) -> SaslStep:
        mechanism = self.mechanism
        self.mechanism = None
        self._scram_state = None
        message = _PLAIN_REFUSED if mechanism == "PLAIN" else _SCRAM_REFUSED.format(mechanism)
        return SaslStep(err.SASL_AUTHENTICATION_FAILED, message=message)

    def _plain(self, token: bytes) -> SaslStep:
        parts = token.split(b"\0")
        if len(parts) != 3:
            return SaslStep(err.SASL_AUTHENTICATION_FAILED, message="PLAIN token is not authzid NUL user NUL password")
        authzid, user_raw, password_raw = parts
        try:
            user, password = user_raw.decode(), password_raw.decode()
        except UnicodeDecodeError:
            return self._refuse()
        if (authzid and authzid != user_raw) or not self._credentials.check_plain(user, password):
            return self._refuse()
        self.user = user
        return SaslStep(err.NONE)

    def _scram_first(self, token: bytes) -> SaslStep:
        try:
            text = token.decode()
        except UnicodeDecodeError:
            return self._refuse()
        # gs2-header: "n" (no channel binding) or "y", an optional authzid, then client-first-bare.
        flag, _, rest = text.partition(",")
        authzid, _, bare = rest.partition(",")
        if flag not in ("n", "y") or (authzid and not authzid.startswith("a=")):
            return SaslStep(err.SASL_AUTHENTICATION_FAILED, message="SCRAM: channel binding is not supported")
        attributes = _attributes(bare)
        user = attributes.get("n")
        nonce = attributes.get("r")
        if user is None or not nonce:
            return SaslStep(err.SASL_AUTHENTICATION_FAILED, message="SCRAM: client-first message lacks n= or r=")
        user = user.replace("=2C", ",").replace("=3D", "=")
        assert self.mechanism is not None
        secret = self._credentials.scram(user, self.mechanism)
        # An unknown user gets a made-up salt, so the answer does not tell the user does not exist.
        salt = secret.salt if secret else hashlib.sha256(b"adiskq-unknown-user:" + user.encode()).digest()[:16]
        iterations = secret.iterations if secret else 8192
        server_nonce = nonce + base64.b64encode(secrets.token_bytes(18)).decode()
        server_first = f"r={server_nonce},s={base64.b64encode(salt).decode()},i={iterations}"
        self._scram_state = (user, nonce, server_nonce, f"{bare},{server_first}")
        return SaslStep(err.NONE, server_first.encode())

    def _scram_final(self, token: bytes) -> SaslStep:
        assert self._scram_state is not None
        assert self.mechanism is not None
        user, client_nonce, nonce, first_messages = self._scram_state
        try:
            text = token.decode()
        except UnicodeDecodeError:
            return self._refuse()
        without_proof, _, proof_part = text.rpartition(",p=")
        attributes = _attributes(without_proof)
        secret = self._credentials.scram(user, self.mechanism)
        # librdkafka before 2.6.1 (Debian's kcat among them) sends its own nonce again in front of the
        # combined one; Kafka 3.8.1-3.9 accept that, and so does this. The server's random part must be
        # there either way, and the proof signs the message as sent.
        if secret is None or attributes.get("r") not in (nonce, client_nonce + nonce) or not proof_part:
            return self._refuse()
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except binascii.Error:
            return self._refuse()
        hash_name = MECHANISMS[self.mechanism]
        auth_message = f"{first_messages},{without_proof}".encode()
        signature = hmac.digest(secret.stored_key, auth_message, hash_name)
        if len(proof) != len(signature):
            return self._refuse()
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(hash_name, client_key).digest(), secret.stored_key):
            return self._refuse()
        self.user = user
        self._scram_state = None
        verifier = base64.b64encode(hmac.digest(secret.server_key, auth_message, hash_name)).decode()
        return SaslStep(err.NONE, f"v={verifier}".encode())


def _attributes(message: str) -> dict[str, str]:
    """``a=1,b=2`` -> ``{"a": "1", "b": "2"}`` (the first letter names each SCRAM attribute)."""
    attributes: dict[str, str] = {}
    for part in message.split(","):
        if len(part) >= 2 and part[1] == "=":
            attributes.setdefault(part[0], part[2:])
    return attributes
