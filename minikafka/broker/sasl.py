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
broker starts, as Kafka's ScramFormatter does (PBKDF2 over the UTF-8 password, no SASLprep); the
SCRAM exchange itself is the ``scramp`` library's. Passwords are compared in constant time. An unknown SCRAM user gets a made-up
salt and fails at the same step as a wrong password, so the exchange does not reveal which
user names exist. Re-authentication (KIP-368) is not offered: SaslAuthenticate answers a
session lifetime of 0, which tells clients never to re-authenticate.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

import scramp
from scramp.utils import ServerError

from minikafka.config import BrokerConfig, list_setting
from minikafka.protocol.apis import ApiKey
from minikafka.protocol.framing import frame
from minikafka.protocol.headers import MalformedRequest, parse_request_header

if TYPE_CHECKING:
    from minikafka.broker.connection import Connection
    from minikafka.broker.listeners import Listener

log = logging.getLogger(__name__)

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_SCRAM_ITERATIONS = 4096
#: what a client may send on a SASL listener before its handshake, and after it until authenticated
_BEFORE_HANDSHAKE = (ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE)
_AFTER_HANDSHAKE = (ApiKey.SASL_AUTHENTICATE,)


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
        for item in list_setting(str(config.get("minikafka.sasl.users"))):
            user, sep, password = item.partition(":")
            if not sep or not user:
                raise ValueError(f"minikafka.sasl.users: {item!r} is not user:password")
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

    def decoy(self, mechanism: str, user: str) -> ScramCredential:
        """A credential for a user that does not exist: the same salt on every try (so the salt does
        not give the user away), keys nobody can match."""
        salt = hmac.new(self._secret, user.encode(), "sha256").digest()[:24]
        size = hashlib.new(_SCRAM_HASHES[mechanism]).digest_size
        return ScramCredential(salt, self.iterations, secrets.token_bytes(size), secrets.token_bytes(size))


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


class ScramServer:
    """RFC 5802 server side, the exchange done by scramp: client-first -> server-first,
    client-final -> server-final.

    scramp parses and checks the messages (attribute order, nonces, channel-binding flag, the
    proof). Two things it does differently from Kafka's ScramSaslServer, both harmless for real
    clients (Java, librdkafka, kafka-python and aiokafka all send ``n,,`` and no extensions):
    a non-empty authorization id in the GS2 header is refused rather than compared with the
    user name, and extensions (Kafka's ``tokenauth=true`` for delegation tokens, which minikafka
    does not offer) fail at the first message rather than at the proof.
    """

    def __init__(self, mechanism: str, users: UserStore) -> None:
        self.mechanism = mechanism
        self.users = users
        self.complete = False
        self.user: str | None = None
        self._step = 0
        self._exchange = scramp.ScramMechanism(mechanism).make_server(self._auth_info)

    def _auth_info(self, user: str) -> tuple[bytes, bytes, bytes, int]:
        """scramp's look-up: an unknown user gets a made-up credential that fails at the proof."""
        self.user = user
        credential = self.users.scram(self.mechanism, user) or self.users.decoy(self.mechanism, user)
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    def _fail(self) -> SaslFailure:
        return SaslFailure(f"Authentication failed during authentication due to invalid credentials with SASL "
                           f"mechanism {self.mechanism}")

    def evaluate(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslFailure(f"Invalid {self.mechanism} message: not UTF-8") from None
        step, self._step = self._step, self._step + 1
        if step == 0:
            try:
                self._exchange.set_client_first(text)
                return self._exchange.get_server_first().encode()
            except Exception as exc:  # scramp's ScramException, or anything odd input makes it raise
                raise SaslFailure(f"Invalid {self.mechanism} client first message: {exc}") from None
        if step == 1:
            try:
                self._exchange.set_client_final(text)
                server_final = self._exchange.get_server_final()
            except scramp.ScramException as exc:
                if exc.server_error == ServerError.INVALID_PROOF:
                    raise self._fail() from None
                raise SaslFailure(f"Invalid {self.mechanism} client final message: {exc}") from None
            except Exception as exc:
                raise SaslFailure(f"Invalid {self.mechanism} client final message: {exc}") from None
            self.complete = True
            return server_final.encode()
        raise SaslFailure(f"Authentication failed: the {self.mechanism} exchange is already complete")


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
        allowed = _BEFORE_HANDSHAKE if self.state == self.HANDSHAKE else _AFTER_HANDSHAKE
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
