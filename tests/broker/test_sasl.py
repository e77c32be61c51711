"""SASL on a listener, byte for byte: Kafka's handshake sequence, PLAIN and SCRAM, v0 and v1 framing.

Every case runs over a real socket against a broker with three listeners side by side
(PLAINTEXT, SASL_PLAINTEXT, SASL_SSL). The SCRAM client side is kafka-python's, so the server is
checked against an implementation it does not share code with.
"""

from __future__ import annotations

import logging
import socket
import ssl
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kafka.net.sasl.scram import ScramClient
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from minikafka.broker.embedded import BrokerThread
from minikafka.broker.listeners import ListenerConfigError
from minikafka.broker.sasl import PlainServer, ScramServer, UserStore
from tests.kafka_wire import RawClient, build_batch
from tests.scenario_helpers import create_topic, produce
from tests.tls_helpers import make_pki

USERS = "alice:alice-secret,bob:b0b:with:colons"
LISTENERS = "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0"


def sasl_config(pki_dir: Path, **extra: Any) -> dict[str, Any]:
    pki = make_pki(pki_dir)
    return {"listeners": LISTENERS, "minikafka.sasl.users": USERS, "ssl.keystore.location": str(pki.keystore),
            **extra}


@pytest.fixture
def sasl_broker(start_broker: Callable[..., BrokerThread], tmp_path: Path) -> BrokerThread:
    return start_broker(config=sasl_config(tmp_path / "pki"))


def endpoint(broker: BrokerThread, name: str) -> str:
    assert broker.broker is not None and broker.broker.listeners is not None
    return broker.broker.listeners.get(name).bootstrap


def plain_token(user: str, password: str, authzid: str = "") -> bytes:
    return f"{authzid}\x00{user}\x00{password}".encode()


def handshake(c: RawClient, mechanism: str, version: int = 1) -> Any:
    return c.request(SaslHandshakeRequest[version](mechanism=mechanism))


def authenticate(c: RawClient, token: bytes, version: int = 2) -> Any:
    return c.request(SaslAuthenticateRequest[version](auth_bytes=token))


def scram_v1(c: RawClient, mechanism: str, user: str, password: str, version: int = 2) -> Any:
    """A full SCRAM exchange over SaslAuthenticate; returns the last response."""
    assert handshake(c, mechanism).error_code == 0
    client = ScramClient(user, password, mechanism)
    first = authenticate(c, client.first_message(), version)
    if first.error_code:
        return first
    client.process_server_first_message(first.auth_bytes)
    final = authenticate(c, client.final_message(), version)
    if final.error_code == 0:
        client.process_server_final_message(final.auth_bytes)  # raises if the server signature is wrong
    return final


def metadata_ok(c: RawClient, broker: BrokerThread, listener: str) -> None:
    response = c.request(MetadataRequest[9](topics=None, allow_auto_topic_creation=False,
                                            include_cluster_authorized_operations=False,
                                            include_topic_authorized_operations=False))
    advertised = f"{response.brokers[0].host}:{response.brokers[0].port}"
    assert advertised == endpoint(broker, listener), "Metadata must name the listener the request came in on"


# ----------------------------------------------------------------------------- the sequence


def test_api_versions_lists_sasl_apis_and_is_served_before_authentication(sasl_broker: BrokerThread) -> None:
    with RawClient(endpoint(sasl_broker, "SASL_PLAINTEXT")) as c:
        keys = {k.api_key: (k.min_version, k.max_version) for k in c.request(ApiVersionsRequest[3](
            client_software_name="t", client_software_version="1")).api_keys}
        assert keys[17] == (0, 1) and keys[36] == (0, 2)
        assert handshake(c, "PLAIN").error_code == 0


@pytest.mark.parametrize("first", ["metadata", "produce", "authenticate-before-handshake"])
def test_any_other_request_before_authentication_closes_the_connection(
    sasl_broker: BrokerThread, first: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="minikafka"), RawClient(endpoint(sasl_broker,
                                                                                   "SASL_PLAINTEXT")) as c:
        if first == "metadata":
            c.send(MetadataRequest[1](topics=None))
        elif first == "produce":
            from tests.kafka_wire import produce_request

            c.send(produce_request("t", 0, build_batch()))
        else:
            c.send(SaslAuthenticateRequest[1](auth_bytes=plain_token("alice", "alice-secret")))
        assert c.is_closed_by_peer()
    assert any("ILLEGAL_SASL_STATE" in r.getMessage() for r in caplog.records)


def test_request_between_handshake_and_authenticate_closes_the_connection(sasl_broker: BrokerThread) -> None:
    with RawClient(endpoint(sasl_broker, "SASL_PLAINTEXT")) as c:
        assert handshake(c, "PLAIN").error_code == 0
        c.send(MetadataRequest[1](topics=None))
        assert c.is_closed_by_peer()


def test_unsupported_mechanism_is_answered_with_the_enabled_list_then_closed(sasl_broker: BrokerThread) -> None:
    with RawClient(endpoint(sasl_broker, "SASL_PLAINTEXT")) as c:
        response = handshake(c, "GSSAPI")
        assert response.error_code == 33
        assert response.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert c.is_closed_by_peer()


def test_non_kafka_bytes_on_a_sasl_listener_close_with_a_hint(
    sasl_broker: BrokerThread, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="minikafka"), RawClient(endpoint(sasl_broker,
                                                                                   "SASL_PLAINTEXT")) as c:
        c.send_raw(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert c.is_closed_by_peer()


def test_frame_above_sasl_server_max_receive_size_before_authentication_closes(
    sasl_broker: BrokerThread,
) -> None:
    with RawClient(endpoint(sasl_broker, "SASL_PLAINTEXT")) as c:
        c.send_raw(struct.pack(">i", 524289) + b"\x00" * 64)
        assert c.is_closed_by_peer()
    # the same size is fine on the PLAINTEXT listener (socket.request.max.bytes is 100 MiB): it waits
    with RawClient(endpoint(sasl_broker, "PLAINTEXT")) as c:
        c.send_raw(struct.pack(">i", 524289) + b"\x00" * 64)
        assert not c.is_closed_by_peer(wait=0.5)


# ----------------------------------------------------------------------------- PLAIN


@pytest.mark.parametrize("auth_version", [0, 1, 2])
def test_plain_with_the_right_password_then_requests_are_served(
    sasl_broker: BrokerThread, auth_version: int
) -> None:
    with RawClient(endpoint(sasl_broker, "SASL_PLAINTEXT")) as c:
        assert handshake(c, "PLAIN").error_code == 0
        response = authenticate(c, plain_token("bob", "b0b:with:colons"), auth_version)
        assert response.error_code == 0 and response.auth_bytes == b""
        if auth_version >= 1:
            assert response.session_lifetime_ms == 0  # no re-authentication
        metadata_ok(c, sasl_broker, "SASL_PLAINTEXT")
        create_topic(c, "after-auth")
        assert produce(c, "after-auth", build_batch()).error_code == 0


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (plain_token("alice", "wrong"), "Invalid username or password"),
        (plain_token("mallory", "alice-secret"), "Invalid username or password"),
        (plain_token("alice", "alice-secret", authzid="bob"), "authorization id"),
        (b"alice\x00alice-secret", "expected 3 tokens"),
        (plain_token("", "x"), "username not specified"),
    ],
    ids=["wrong-password", "unknown-user", "other-authzid", "two-tokens", "empty-user"],
)
def test_plain_failure_answers_sasl_authentication_failed_then_closes(
    sasl_broker: BrokerThread, token: bytes, message: str
) -> None:
    with RawClient(endpoint(sasl_broker, "SASL_PLAINTEXT")) as c:
        assert handshake(c, "PLAIN").error_code == 0
        response = authenticate(c, token)
        assert response.error_code == 58
        assert message in response.error_message
        assert c.is_closed_by_peer()


def test_handshake_v0_then_raw_plain_token(sasl_broker: BrokerThread) -> None:
    with RawClient(endpoint(sasl_broker, "SASL_PLAINTEXT")) as c:
        assert handshake(c, "PLAIN", version=0).error_code == 0
        token = plain_token("alice", "alice-secret")
        c.send_raw(struct.pack(">i", len(token)) + token)
        assert c.recv_frame() == b""  # an empty server token, size-prefixed, no Kafka header
        metadata_ok(c, sasl_broker, "SASL_PLAINTEXT")


def test_handshake_v0_then_wrong_raw_token_closes_without_an_answer(sasl_broker: BrokerThread) -> None:
    with RawClient(endpoint(sasl_broker, "SASL_PLAINTEXT")) as c:
        assert handshake(c, "PLAIN", version=0).error_code == 0
        token = plain_token("alice", "nope")
        c.send_raw(struct.pack(">i", len(token)) + token)
        assert c.is_closed_by_peer()


def test_sasl_apis_on_a_plaintext_listener_answer_illegal_sasl_state_and_keep_the_connection(
    sasl_broker: BrokerThread,
) -> None:
    with RawClient(endpoint(sasl_broker, "PLAINTEXT")) as c:
        assert handshake(c, "PLAIN").error_code == 34
        response = authenticate(c, plain_token("alice", "alice-secret"))
        assert response.error_code == 34
        metadata_ok(c, sasl_broker, "PLAINTEXT")


def test_second_handshake_after_authentication_answers_illegal_sasl_state(sasl_broker: BrokerThread) -> None:
    with RawClient(endpoint(sasl_broker, "SASL_PLAINTEXT")) as c:
        assert handshake(c, "PLAIN").error_code == 0
        assert authenticate(c, plain_token("alice", "alice-secret")).error_code == 0
        assert handshake(c, "PLAIN").error_code == 34
        metadata_ok(c, sasl_broker, "SASL_PLAINTEXT")


# ----------------------------------------------------------------------------- SCRAM


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_with_the_right_password_verifies_both_ways(sasl_broker: BrokerThread, mechanism: str) -> None:
    with RawClient(endpoint(sasl_broker, "SASL_PLAINTEXT")) as c:
        assert scram_v1(c, mechanism, "alice", "alice-secret").error_code == 0
        metadata_ok(c, sasl_broker, "SASL_PLAINTEXT")


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("user", ["alice", "nobody"])
def test_scram_with_a_wrong_password_or_unknown_user_fails_at_the_final_step(
    sasl_broker: BrokerThread, mechanism: str, user: str
) -> None:
    with RawClient(endpoint(sasl_broker, "SASL_PLAINTEXT")) as c:
        response = scram_v1(c, mechanism, user, "wrong")
        assert response.error_code == 58
        assert f"invalid credentials with SASL mechanism {mechanism}" in response.error_message
        assert c.is_closed_by_peer()


def test_scram_over_handshake_v0_raw_frames(sasl_broker: BrokerThread) -> None:
    with RawClient(endpoint(sasl_broker, "SASL_PLAINTEXT")) as c:
        assert handshake(c, "SCRAM-SHA-256", version=0).error_code == 0
        client = ScramClient("alice", "alice-secret", "SCRAM-SHA-256")
        first = client.first_message()
        c.send_raw(struct.pack(">i", len(first)) + first)
        client.process_server_first_message(c.recv_frame())
        final = client.final_message()
        c.send_raw(struct.pack(">i", len(final)) + final)
        client.process_server_final_message(c.recv_frame())
        metadata_ok(c, sasl_broker, "SASL_PLAINTEXT")


def test_scram_iteration_count_is_at_least_4096(sasl_broker: BrokerThread) -> None:
    with RawClient(endpoint(sasl_broker, "SASL_PLAINTEXT")) as c:
        assert handshake(c, "SCRAM-SHA-512").error_code == 0
        client = ScramClient("alice", "alice-secret", "SCRAM-SHA-512")
        first = authenticate(c, client.first_message())
        fields = dict(part.split("=", 1) for part in first.auth_bytes.decode().split(","))
        assert int(fields["i"]) >= 4096
        assert fields["r"].startswith(client.nonce.decode()) and len(fields["r"]) > len(client.nonce)


@pytest.mark.parametrize(
    "message",
    [b"p=tls-server-end-point,,n=alice,r=abc", b"n,,r=abc,n=alice", b"n,,n=alice", b"\xff\xfe", b"",
     b"n,a=bob,n=alice,r=abc", b"n,,n=al=ZZice,r=abc", b"n,,n=alice,r=abc,m=ext"],
    ids=["channel-binding", "attributes-out-of-order", "no-nonce", "not-utf8", "empty", "authzid-mismatch",
         "bad-escape", "mandatory-extension"],
)
def test_malformed_scram_client_first_message_is_refused(sasl_broker: BrokerThread, message: bytes) -> None:
    with RawClient(endpoint(sasl_broker, "SASL_PLAINTEXT")) as c:
        assert handshake(c, "SCRAM-SHA-256").error_code == 0
        assert authenticate(c, message).error_code == 58
        assert c.is_closed_by_peer()


def test_scram_final_message_with_a_tampered_nonce_is_refused() -> None:
    users = UserStore({"alice": "pw"})
    server = ScramServer("SCRAM-SHA-256", users)
    client = ScramClient("alice", "pw", "SCRAM-SHA-256")
    client.process_server_first_message(server.evaluate(client.first_message()))
    final = client.final_message().replace(b"r=", b"r=X", 1)
    with pytest.raises(Exception, match="nonce"):
        server.evaluate(final)
    assert not server.complete


def test_plain_mechanism_refuses_a_second_token() -> None:
    server = PlainServer(UserStore({"u": "p"}))
    assert server.evaluate(plain_token("u", "p")) == b""
    with pytest.raises(Exception, match="already complete"):
        server.evaluate(plain_token("u", "p"))


# ----------------------------------------------------------------------------- TLS and config


def _tls_socket(bootstrap: str, ca_file: Path) -> ssl.SSLSocket:
    host, _, port = bootstrap.rpartition(":")
    context = ssl.create_default_context(cafile=str(ca_file))
    raw = socket.create_connection((host, int(port)), timeout=10)
    return context.wrap_socket(raw, server_hostname=host)


def test_sasl_ssl_listener_speaks_tls_and_authenticates(start_broker: Callable[..., BrokerThread],
                                                        tmp_path: Path) -> None:
    broker = start_broker(config=sasl_config(tmp_path / "pki"))
    ca = tmp_path / "pki" / "ca.pem"
    c = RawClient.__new__(RawClient)
    c.sock, c.client_id, c._correlation = _tls_socket(endpoint(broker, "SASL_SSL"), ca), "tls-test", 0
    with c:
        assert handshake(c, "SCRAM-SHA-512").error_code == 0
        client = ScramClient("alice", "alice-secret", "SCRAM-SHA-512")
        first = authenticate(c, client.first_message())
        client.process_server_first_message(first.auth_bytes)
        final = authenticate(c, client.final_message())
        assert final.error_code == 0
        client.process_server_final_message(final.auth_bytes)
        metadata_ok(c, broker, "SASL_SSL")


def test_plaintext_bytes_on_the_tls_port_are_dropped_and_the_broker_keeps_serving(
    sasl_broker: BrokerThread,
) -> None:
    with RawClient(endpoint(sasl_broker, "SASL_SSL")) as c:
        c.send(ApiVersionsRequest[0]())
        assert c.is_closed_by_peer(wait=5)
    with RawClient(endpoint(sasl_broker, "PLAINTEXT")) as c:
        metadata_ok(c, sasl_broker, "PLAINTEXT")


def test_encrypted_key_and_inline_pem_settings_load(start_broker: Callable[..., BrokerThread],
                                                    tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "enc", password=b"key-pass")
    broker = start_broker(config={"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": str(pki.keystore),
                                  "ssl.key.password": "key-pass"})
    sock = _tls_socket(broker.bootstrap, pki.ca_file)
    sock.close()
    inline = start_broker(config={
        "listeners": "SSL://127.0.0.1:0",
        "ssl.keystore.certificate.chain": pki.cert_file.read_text(),
        "ssl.keystore.key": pki.key_file.read_text(),
        "ssl.key.password": "key-pass",
    })
    _tls_socket(inline.bootstrap, pki.ca_file).close()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"listeners": "PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0"}, "once"),
        ({"listeners": "INTERNAL://127.0.0.1:0"}, "listener.security.protocol.map"),
        ({"listeners": "SSL://127.0.0.1:0"}, "ssl.keystore"),
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "GSSAPI"}, "GSSAPI"),
        ({"listeners": "PLAINTEXT://127.0.0.1:0", "advertised.listeners": "OTHER://h:1"}, "not in listeners"),
        ({"listeners": "nonsense"}, "NAME://host:port"),
        ({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "JKS", "ssl.keystore.location": "x"}, "PEM"),
    ],
)
def test_listener_settings_that_cannot_work_stop_the_start(
    start_broker: Callable[..., BrokerThread], settings: dict[str, str], message: str
) -> None:
    with pytest.raises(ListenerConfigError, match=message):
        start_broker(config=settings)


def test_named_listeners_with_a_protocol_map_and_advertised_addresses(
    start_broker: Callable[..., BrokerThread], tmp_path: Path
) -> None:
    broker = start_broker(config={
        "listeners": "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
        "advertised.listeners": "INTERNAL://127.0.0.1:0,EXTERNAL://localhost:19999",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT",
        "minikafka.sasl.users": USERS,
    })
    with RawClient(endpoint(broker, "INTERNAL")) as c:
        metadata_ok(c, broker, "INTERNAL")
    assert broker.broker is not None and broker.broker.listeners is not None
    external = broker.broker.listeners.get("EXTERNAL")
    assert external.bootstrap == "localhost:19999"
    with RawClient(f"127.0.0.1:{external.port}") as c:
        assert handshake(c, "PLAIN").error_code == 0
        assert authenticate(c, plain_token("alice", "alice-secret")).error_code == 0
        metadata_ok(c, broker, "EXTERNAL")


def test_listener_ports_picked_at_start_survive_a_restart(sasl_broker: BrokerThread) -> None:
    before = {name: endpoint(sasl_broker, name) for name in ("PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL")}
    sasl_broker.restart()
    assert {name: endpoint(sasl_broker, name) for name in before} == before
    with RawClient(before["SASL_PLAINTEXT"]) as c:
        assert scram_v1(c, "SCRAM-SHA-256", "alice", "alice-secret").error_code == 0


def test_users_file_and_per_listener_mechanisms(start_broker: Callable[..., BrokerThread], tmp_path: Path) -> None:
    users = tmp_path / "users.json"
    users.write_text('{"carol": "c,with,commas"}')
    broker = start_broker(config={
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "minikafka.sasl.users.file": str(users),
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-512",
    })
    with RawClient(broker.bootstrap) as c:
        assert handshake(c, "PLAIN").error_code == 33
    with RawClient(broker.bootstrap) as c:
        assert scram_v1(c, "SCRAM-SHA-512", "carol", "c,with,commas").error_code == 0
