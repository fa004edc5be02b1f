"""The gateway's SASL credentials file: SCRAM salted keys per user, never a password.

::

    {
      "users": {
        "alice": {
          "SCRAM-SHA-256": {"salt": "<base64>", "iterations": 8192,
                            "stored_key": "<base64>", "server_key": "<base64>"},
          "SCRAM-SHA-512": {"salt": "<base64>", "iterations": 8192,
                            "stored_key": "<base64>", "server_key": "<base64>"}
        }
      }
    }

Per RFC 5802: ``SaltedPassword = PBKDF2-HMAC(password, salt, iterations)``,
``StoredKey = H(HMAC(SaltedPassword, "Client Key"))``, ``ServerKey = HMAC(SaltedPassword, "Server
Key")``. A SCRAM client proves it knows the password against these; a PLAIN client's password is
checked by deriving ``StoredKey`` again with the stored salt, so the file holds nothing a password
can be read back from. ``adiskq kafka-user FILE NAME`` writes an entry (both mechanisms).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass
from typing import Final

from .._storage.files import atomic_write_json

__all__ = [
    "MECHANISMS",
    "Credentials",
    "ScramSecret",
    "load_credentials",
    "make_secret",
    "save_user",
]

# Mechanism -> hashlib name.
MECHANISMS: Final = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# Kafka's own minimum for SCRAM credentials is 4096 iterations.
DEFAULT_ITERATIONS: Final = 8192
MIN_ITERATIONS: Final = 4096


@dataclass(frozen=True, slots=True)
class ScramSecret:
    """One user's SCRAM keys for one mechanism."""

    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    def check_password(self, hash_name: str, password: str) -> bool:
        """True if ``password`` derives this secret's stored key (how PLAIN logins are checked)."""
        salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), self.salt, self.iterations)
        client_key = hmac.digest(salted, b"Client Key", hash_name)
        return hmac.compare_digest(hashlib.new(hash_name, client_key).digest(), self.stored_key)


def make_secret(hash_name: str, password: str, *, iterations: int = DEFAULT_ITERATIONS) -> ScramSecret:
    """A fresh salt and the SCRAM keys of ``password`` under it."""
    salt = secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)
    client_key = hmac.digest(salted, b"Client Key", hash_name)
    return ScramSecret(
        salt,
        iterations,
        hashlib.new(hash_name, client_key).digest(),
        hmac.digest(salted, b"Server Key", hash_name),
    )


class Credentials:
    """The users of a credentials file, by name and mechanism."""

    def __init__(self, users: dict[str, dict[str, ScramSecret]]) -> None:
        self._users = users
        # What a PLAIN login of an unknown user is checked against: the same derivation a known
        # user's costs (the first user's first mechanism and iterations), so the time a refusal
        # takes does not tell which users exist. No password derives its made-up stored key.
        first = next((next(iter(secrets_.items())) for secrets_ in users.values() if secrets_), None)
        mechanism, like = first if first is not None else ("SCRAM-SHA-256", None)
        self._decoy = (
            MECHANISMS[mechanism],
            ScramSecret(
                hashlib.sha256(b"adiskq-unknown-user").digest()[:16],
                like.iterations if like is not None else DEFAULT_ITERATIONS,
                bytes(hashlib.new(MECHANISMS[mechanism]).digest_size),
                b"",
            ),
        )

    def scram(self, user: str, mechanism: str) -> ScramSecret | None:
        """The user's keys for this SCRAM mechanism, or None."""
        return self._users.get(user, {}).get(mechanism)

    def check_plain(self, user: str, password: str) -> bool:
        """True if ``password`` is the user's (checked against the first SCRAM secret stored). A key
        derivation (PBKDF2): seconds of CPU a thousand logins, so the gateway runs it in a worker
        thread. An unknown user costs the same derivation, and is refused."""
        for mechanism, secret in self._users.get(user, {}).items():
            return secret.check_password(MECHANISMS[mechanism], password)
        hash_name, decoy = self._decoy
        decoy.check_password(hash_name, password)
        return False


def _b64(entry: dict[str, object], field: str, where: str) -> bytes:
    value = entry.get(field)
    if not isinstance(value, str):
        raise ValueError(f"{where}: {field!r} must be a base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except ValueError:
        raise ValueError(f"{where}: {field!r} is not valid base64") from None


def _parse(data: object, path: str) -> dict[str, dict[str, ScramSecret]]:
    if not isinstance(data, dict) or not isinstance(data.get("users"), dict):
        raise ValueError(f'{path}: expected {{"users": {{NAME: {{MECHANISM: {{...}}}}}}}}')
    users: dict[str, dict[str, ScramSecret]] = {}
    for name, mechanisms in data["users"].items():
        if not isinstance(mechanisms, dict) or not mechanisms:
            raise ValueError(f"{path}: user {name!r} needs at least one of {', '.join(MECHANISMS)}")
        users[name] = {}
        for mechanism, entry in mechanisms.items():
            where = f"{path}: user {name!r}, {mechanism}"
            if mechanism not in MECHANISMS:
                raise ValueError(f"{where}: unknown mechanism (use {' or '.join(MECHANISMS)})")
            if not isinstance(entry, dict):
                raise ValueError(f"{where}: expected an object with salt, iterations, stored_key, server_key")
            iterations = entry.get("iterations")
            if not isinstance(iterations, int) or isinstance(iterations, bool) or iterations < MIN_ITERATIONS:
                raise ValueError(f"{where}: 'iterations' must be a whole number of at least {MIN_ITERATIONS}")
            users[name][mechanism] = ScramSecret(
                _b64(entry, "salt", where),
                iterations,
                _b64(entry, "stored_key", where),
                _b64(entry, "server_key", where),
            )
    return users


def load_credentials(path: str | os.PathLike[str]) -> Credentials:
    """Read a credentials file; ``ValueError`` saying what is wrong with a malformed one."""
    path = os.fspath(path)
    with open(path, "rb") as file:
        raw = file.read()
    try:
        data = json.loads(raw)
    except ValueError as error:
        raise ValueError(f"{path} is not valid JSON ({error})") from None
    return Credentials(_parse(data, path))


def save_user(path: str | os.PathLike[str], user: str, password: str, *, iterations: int = DEFAULT_ITERATIONS) -> None:
    """Add or replace ``user`` in the credentials file (created if missing, mode 0600), both mechanisms."""
    path = os.fspath(path)
    if not user:
        raise ValueError("a SASL user name cannot be empty")
    try:
        with open(path, "rb") as file:
            data = json.loads(file.read())
        _parse(data, path)
    except FileNotFoundError:
        data = {"users": {}}
    entries = {}
    for mechanism, hash_name in MECHANISMS.items():
        secret = make_secret(hash_name, password, iterations=iterations)
        entries[mechanism] = {
            "salt": base64.b64encode(secret.salt).decode(),
            "iterations": secret.iterations,
            "stored_key": base64.b64encode(secret.stored_key).decode(),
            "server_key": base64.b64encode(secret.server_key).decode(),
        }
    data["users"][user] = entries
    atomic_write_json(path, data, durable=True, mode=0o600)
