"""SASL authentication on a listener: PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802, RFC 7677).

A connection to a SASL listener goes through Kafka's sequence before anything else is served:

1. ApiVersions (any number of times) and one SaslHandshake naming the mechanism. Any other
   request closes the connection, as Kafka does (an ILLEGAL_SASL_STATE line is logged).
2. The mechanism's tokens. After SaslHandshake v1 they travel in SaslAuthenticate requests;
   after v0 they are bare size-prefixed frames with no Kafka header, answered the same way.
3. Success: the connection is served like any other. Failure: SaslAuthenticate answers
   SASL_AUTHENTICATION_FAILED with a message (v0: no answer) and the connection is closed.

Users come from ``minikafka.sasl.users`` (``alice:secret,bob:pw``) and/or
``minikafka.sasl.users.file`` (a JSON object ``{"alice": "secret"}``). SCRAM credentials
(salt, iteration count, stored and server keys) are derived from those passwords when the
broker starts; passwords are compared in constant time. An unknown SCRAM user gets a made-up
salt and fails at the same step as a wrong password, so the exchange does not reveal which
user names exist. Re-authentication (KIP-368) is not offered: SaslAuthenticate answers a
session lifetime of 0, which tells clients never to re-authenticate.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

from minikafka.config import BrokerConfig
from minikafka.protocol.framing import frame
from minikafka.protocol.headers import MalformedRequest, parse_request_header

if TYPE_CHECKING:
    from minikafka.broker.connection import Connection
    from minikafka.broker.listeners import Listener

log = logging.getLogger("minikafka.sasl")

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_SCRAM_ITERATIONS = 4096
API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36


class SaslFailure(Exception):
    """Authentication failed; ``str(exc)`` is the message the client is sent."""


# --------------------------------------------------------------------------- users and credentials


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


def scram_credential(hash_name: str, password: str, salt: bytes, iterations: int) -> ScramCredential:
    """RFC 5802 §3: SaltedPassword, then the stored and server keys the server keeps."""
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode("utf-8"), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hash_name).digest()
    server_key = hmac.new(salted, b"Server Key", hash_name).digest()
    return ScramCredential(salt, iterations, hashlib.new(hash_name, client_key).digest(), server_key)


class UserStore:
    """Users and passwords from the broker settings, with SCRAM credentials derived once."""

    def __init__(self, passwords: dict[str, str], iterations: int = MIN_SCRAM_ITERATIONS) -> None:
        if iterations < MIN_SCRAM_ITERATIONS:
            raise ValueError(f"minikafka.sasl.scram.iterations must be at least {MIN_SCRAM_ITERATIONS}")
        self._passwords = dict(passwords)
        self.iterations = iterations
        self._scram: dict[tuple[str, str], ScramCredential] = {}
        self._secret = secrets.token_bytes(32)  # makes up salts for unknown users

    @classmethod
    def from_config(cls, config: BrokerConfig) -> UserStore:
        passwords: dict[str, str] = {}
        for item in str(config.get("minikafka.sasl.users")).split(","):
            if not item.strip():
                continue
            user, sep, password = item.strip().partition(":")
            if not sep or not user:
                raise ValueError(f"minikafka.sasl.users: {item.strip()!r} is not user:password")
            passwords[user] = password
        path = str(config.get("minikafka.sasl.users.file")).strip()
        if path:
            with open(path, encoding="utf-8") as handle:
                loaded = json.load(handle)
            if not isinstance(loaded, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                       for k, v in loaded.items()):
                raise ValueError(f"minikafka.sasl.users.file {path}: expected a JSON object of user: password")
            passwords.update(loaded)
        store = cls(passwords, int(config.get("minikafka.sasl.scram.iterations")))
        for user in passwords:  # derive now: a client should not pay PBKDF2 on its first connection
            for mechanism in _SCRAM_HASHES:
                store.scram(mechanism, user)
        return store

    def __len__(self) -> int:
        return len(self._passwords)

    def check_password(self, user: str, password: str) -> bool:
        expected = self._passwords.get(user)
        # compare even for unknown users, so both paths take the same time
        ok = hmac.compare_digest((expected or "\x00unknown").encode(), password.encode())
        return ok and expected is not None

    def scram(self, mechanism: str, user: str) -> ScramCredential | None:
        key = (mechanism, user)
        cred = self._scram.get(key)
        if cred is None and user in self._passwords:
            cred = scram_credential(_SCRAM_HASHES[mechanism], self._passwords[user], secrets.token_bytes(24),
                                    self.iterations)
            self._scram[key] = cred
        return cred

    def decoy_salt(self, user: str) -> bytes:
        return hmac.new(self._secret, user.encode(), "sha256").digest()[:24]


# --------------------------------------------------------------------------- mechanisms


class PlainServer:
    """RFC 4616: one client message ``authzid NUL user NUL password``, answered with nothing."""

    mechanism = "PLAIN"

    def __init__(self, users: UserStore) -> None:
        self.users = users
        self.complete = False
        self.user: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslFailure("Authentication failed: the PLAIN exchange is already complete")
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise SaslFailure(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        try:
            authzid, user, password = (part.decode("utf-8") for part in parts)
        except UnicodeDecodeError:
            raise SaslFailure("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user:
            raise SaslFailure("Authentication failed: username not specified")
        if not password:
            raise SaslFailure("Authentication failed: password not specified")
        if authzid and authzid != user:
            raise SaslFailure("Authentication failed: Client requested an authorization id that is different "
                              "from username")
        if not self.users.check_password(user, password):
            raise SaslFailure("Authentication failed: Invalid username or password")
        self.user = user
        self.complete = True
        return b""


def _scram_attributes(text: str) -> list[tuple[str, str]]:
    out = []
    for part in text.split(","):
        if len(part) < 2 or part[1] != "=":
            raise ValueError(f"malformed attribute {part[:20]!r}")
        out.append((part[0], part[2:]))
    return out


def _unescape_saslname(name: str) -> str:
    out, i = [], 0
    while i < len(name):
        if name[i] == "=":
            code = name[i + 1 : i + 3]
            if code not in ("2C", "3D"):
                raise ValueError("invalid escape in user name")
            out.append("," if code == "2C" else "=")
            i += 3
        else:
            out.append(name[i])
            i += 1
    return "".join(out)


class ScramServer:
    """RFC 5802 server side: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mechanism: str, users: UserStore) -> None:
        self.mechanism = mechanism
        self.hash_name = _SCRAM_HASHES[mechanism]
        self.users = users
        self.complete = False
        self.user: str | None = None
        self._step = 0
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._credential: ScramCredential | None = None

    def _fail(self) -> SaslFailure:
        return SaslFailure(f"Authentication failed during authentication due to invalid credentials with SASL "
                           f"mechanism {self.mechanism}")

    def evaluate(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslFailure(f"Invalid {self.mechanism} message: not UTF-8") from None
        if self._step == 0:
            return self._client_first(text)
        if self._step == 1:
            return self._client_final(text)
        raise SaslFailure(f"Authentication failed: the {self.mechanism} exchange is already complete")

    def _client_first(self, text: str) -> bytes:
        flag, sep1, rest = text.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if not (sep1 and sep2) or flag not in ("n", "y") or (authzid and not authzid.startswith("a=")):
            # "p=..." asks for channel binding, which minikafka does not offer
            raise SaslFailure(f"Invalid {self.mechanism} client first message")
        try:
            attributes = _scram_attributes(bare)
            if len(attributes) < 2 or attributes[0][0] != "n" or attributes[1][0] != "r":
                raise ValueError("expected n= then r=")
            user = _unescape_saslname(attributes[0][1])
            extensions = {key: value for key, value in attributes[2:]}
        except ValueError as exc:
            raise SaslFailure(f"Invalid {self.mechanism} client first message: {exc}") from None
        client_nonce = attributes[1][1]
        if not user or not client_nonce or not client_nonce.isprintable():
            raise SaslFailure(f"Invalid {self.mechanism} client first message")
        if "m" in extensions:
            raise SaslFailure(f"Invalid {self.mechanism} client first message: mandatory extension")
        if authzid and _unescape_saslname(authzid[2:]) != user:
            raise SaslFailure("Authentication failed: Client requested an authorization id that is different "
                              "from username")
        self.user = user
        self._gs2_header = f"{flag},{authzid},"
        self._client_first_bare = bare
        self._nonce = client_nonce + secrets.token_urlsafe(24)
        self._credential = self.users.scram(self.mechanism, user)
        if self._credential is None or "tokenauth" in extensions:  # delegation tokens are not offered
            salt, iterations = self.users.decoy_salt(user), self.users.iterations
        else:
            salt, iterations = self._credential.salt, self._credential.iterations
        self._server_first = f"r={self._nonce},s={base64.b64encode(salt).decode()},i={iterations}"
        self._step = 1
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        self._step = 2
        without_proof, sep, proof_text = text.rpartition(",p=")
        try:
            attributes = _scram_attributes(without_proof) if sep else []
            if len(attributes) < 2 or attributes[0][0] != "c" or attributes[1][0] != "r":
                raise ValueError("expected c= then r= then p=")
            binding = base64.b64decode(attributes[0][1], validate=True).decode("utf-8")
            proof = base64.b64decode(proof_text, validate=True)
        except ValueError as exc:  # binascii.Error and UnicodeDecodeError are ValueErrors
            raise SaslFailure(f"Invalid {self.mechanism} client final message: {exc}") from None
        if binding != self._gs2_header or attributes[1][1] != self._nonce:
            raise SaslFailure(f"Invalid {self.mechanism} client final message: channel binding or nonce mismatch")
        credential = self._credential
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        if credential is None or len(proof) != len(credential.stored_key):
            raise self._fail()
        signature = hmac.new(credential.stored_key, auth_message, self.hash_name).digest()
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self.hash_name, client_key).digest(), credential.stored_key):
            raise self._fail()
        server_signature = hmac.new(credential.server_key, auth_message, self.hash_name).digest()
        self.complete = True
        return b"v=" + base64.b64encode(server_signature)


def new_mechanism(mechanism: str, users: UserStore) -> PlainServer | ScramServer:
    if mechanism == "PLAIN":
        return PlainServer(users)
    return ScramServer(mechanism, users)


# --------------------------------------------------------------------------- per-connection state


class SaslSession:
    """Where one connection is in the SASL sequence (see the module docstring)."""

    HANDSHAKE, AUTHENTICATE, COMPLETE = "handshake", "authenticate", "complete"

    def __init__(self, listener: Listener, users: UserStore) -> None:
        self.listener = listener
        self.users = users
        self.state = self.HANDSHAKE
        self.raw_tokens = False  # SaslHandshake v0: tokens come as bare frames
        self.server: PlainServer | ScramServer | None = None

    @property
    def complete(self) -> bool:
        return self.state == self.COMPLETE

    @property
    def principal(self) -> str | None:
        return f"User:{self.server.user}" if self.server is not None and self.server.complete else None

    def begin(self, mechanism: str, handshake_version: int) -> None:
        self.server = new_mechanism(mechanism, self.users)
        self.raw_tokens = handshake_version == 0
        self.state = self.AUTHENTICATE

    def evaluate(self, token: bytes) -> bytes:
        """One client token in, the server's answer out; raises :class:`SaslFailure`."""
        assert self.server is not None
        answer = self.server.evaluate(bytes(token))
        if self.server.complete:
            self.state = self.COMPLETE
        return answer

    async def screen(self, conn: Connection, payload: bytes) -> bool | None:
        """Judge a frame that arrives before authentication is complete.

        Returns None when the frame is a request the normal path may serve (ApiVersions,
        SaslHandshake, SaslAuthenticate in the right state); otherwise handles it here and
        returns whether the connection stays open.
        """
        if self.state == self.AUTHENTICATE and self.raw_tokens:
            return await self._raw_token(conn, payload)
        try:
            header = parse_request_header(payload, conn.broker.request_is_flexible)
        except MalformedRequest as exc:
            log.warning("closing connection from %s on SASL listener %s: not a Kafka request (%s); is the client "
                        "configured with the wrong security protocol?", conn.peer, self.listener.name, exc)
            return False
        allowed = (API_VERSIONS, SASL_HANDSHAKE) if self.state == self.HANDSHAKE else (SASL_AUTHENTICATE,)
        if header.api_key in allowed:
            return None
        log.warning("closing connection from %s on SASL listener %s: ILLEGAL_SASL_STATE: unexpected request "
                    "(API key %d) during SASL %s (client %r)", conn.peer, self.listener.name, header.api_key,
                    self.state, header.client_id)
        return False

    async def _raw_token(self, conn: Connection, token: bytes) -> bool:
        try:
            answer = self.evaluate(token)
        except SaslFailure as exc:
            log.warning("closing connection from %s: SASL %s authentication failed: %s", conn.peer,
                        self.server.mechanism if self.server else "?", exc)
            await delay_close(conn.broker.config)
            return False
        conn.write_raw(frame([answer]))
        if self.complete:
            log.info("%s authenticated as %s with %s on listener %s", conn.peer, self.principal,
                     self.server.mechanism if self.server else "?", self.listener.name)
        return True


async def delay_close(config: BrokerConfig) -> None:
    """Wait ``connection.failed.authentication.delay.ms`` before closing a failed connection.

    Kafka does this to slow down password guessing; it also lets the client read the error
    answer before it sees the connection end (some clients drop data that arrives with the close).
    """
    delay_ms = int(config.get("connection.failed.authentication.delay.ms"))
    if delay_ms > 0:
        await asyncio.sleep(delay_ms / 1000)
