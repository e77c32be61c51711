"""Real clients authenticate over TLS with SASL/PLAIN and SCRAM, then produce and consume.

The broker serves PLAINTEXT and SASL_SSL side by side; each client bootstraps through the
SASL_SSL port and must stay on it (Metadata advertises the listener a request came in on).
Wrong credentials are refused with Kafka's SASL_AUTHENTICATION_FAILED and its message.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from minikafka.broker.embedded import BrokerThread
from tests.client_helpers import Rec, aiokafka_read, aiokafka_send, check_consumed, make_records
from tests.kafka_wire import RawClient
from tests.scenario_helpers import create_topic
from tests.tls_helpers import Pki, make_pki

MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
USER, PASSWORD = "alice", "alice-secret"
N = 200
#: the broker modules that log the SASL exchange
SASL_LOGGERS = ("minikafka.broker.sasl", "minikafka.broker.handlers.sasl_handshake",
                "minikafka.broker.handlers.sasl_authenticate")


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("sasl-clients")
    pki = make_pki(root / "pki")
    broker = BrokerThread(data_dir=str(root / "data"), port=0, config={
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "minikafka.sasl.users": f"{USER}:{PASSWORD}",
        "ssl.keystore.location": str(pki.keystore),
    }).start()
    yield broker, pki
    broker.stop()


def sasl_endpoint(broker: BrokerThread) -> str:
    assert broker.broker is not None and broker.broker.listeners is not None
    return broker.broker.listeners.get("SASL_SSL").bootstrap


# ----------------------------------------------------------------------------- per-client settings


def confluent_settings(bootstrap: str, pki: Pki, mechanism: str, password: str) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
            "sasl.username": USER, "sasl.password": password, "ssl.ca.location": str(pki.ca_file)}


def python_settings(bootstrap: str, pki: Pki, mechanism: str, password: str) -> dict[str, Any]:
    return {"bootstrap_servers": bootstrap, "security_protocol": "SASL_SSL", "sasl_mechanism": mechanism,
            "sasl_plain_username": USER, "sasl_plain_password": password}


def confluent_roundtrip(bootstrap: str, pki: Pki, mechanism: str, topic: str, records: list[Any]) -> list[Rec]:
    from confluent_kafka import Consumer, Producer, TopicPartition

    settings = confluent_settings(bootstrap, pki, mechanism, PASSWORD)
    errors: list[Any] = []
    producer = Producer({**settings, "enable.idempotence": True, "linger.ms": 5})
    for key, value, headers, ts in records:
        producer.produce(topic, value=value, key=key, headers=headers, timestamp=ts,
                         on_delivery=lambda err, _msg: errors.append(err) if err else None)
    assert producer.flush(30) == 0 and not errors, errors[:3]
    consumer = Consumer({**settings, "group.id": "sasl-test", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[Rec] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < len(records) and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=500, timeout=0.5):
                assert msg.error() is None, msg.error()
                got.append(Rec(msg.partition(), msg.offset(), msg.key(), msg.value(), tuple(msg.headers() or ()),
                               msg.timestamp()[1]))
    finally:
        consumer.close()
    return got


def kafka_python_roundtrip(bootstrap: str, pki: Pki, mechanism: str, topic: str,
                           records: list[Any]) -> list[Rec]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    settings = {**python_settings(bootstrap, pki, mechanism, PASSWORD), "ssl_cafile": str(pki.ca_file)}
    producer = KafkaProducer(**settings, enable_idempotence=True, linger_ms=5)
    futures = [producer.send(topic, key=k, value=v, headers=h, timestamp_ms=ts) for k, v, h, ts in records]
    producer.flush(30)
    for future in futures:
        future.get(timeout=30)
    producer.close(timeout=10)
    consumer = KafkaConsumer(**settings, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest")
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got: list[Rec] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < len(records) and time.monotonic() < deadline:
            for part, msgs in consumer.poll(timeout_ms=500).items():
                got.extend(Rec(part.partition, m.offset, m.key, m.value, tuple(m.headers), m.timestamp) for m in msgs)
    finally:
        consumer.close()
    return got


def aiokafka_roundtrip(bootstrap: str, pki: Pki, mechanism: str, topic: str, records: list[Any]) -> list[Rec]:
    from aiokafka.helpers import create_ssl_context

    async def run() -> list[Rec]:
        settings = {**python_settings(bootstrap, pki, mechanism, PASSWORD),
                    "ssl_context": create_ssl_context(cafile=str(pki.ca_file))}
        await aiokafka_send(topic, records, 30, **settings, enable_idempotence=True, linger_ms=5)
        try:
            return await aiokafka_read(topic, 1, len(records), 30, **settings)
        finally:
            await asyncio.sleep(0.1)  # let closing transports finish before asyncio.run closes the loop

    return asyncio.run(run())


ROUNDTRIPS: dict[str, Callable[..., list[Rec]]] = {
    "confluent-kafka": confluent_roundtrip,
    "kafka-python": kafka_python_roundtrip,
    "aiokafka": aiokafka_roundtrip,
}


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("client", list(ROUNDTRIPS))
def test_client_authenticates_over_tls_and_produces_and_consumes_every_record_once(
    secured: Any, client: str, mechanism: str
) -> None:
    broker, pki = secured
    topic = f"sasl-{client}-{mechanism}".replace(".", "-")
    with RawClient(broker.bootstrap) as c:  # the PLAINTEXT listener, side by side
        create_topic(c, topic)
    records = make_records(N)
    got = ROUNDTRIPS[client](sasl_endpoint(broker), pki, mechanism, topic, records)
    check_consumed(records, got)


# ----------------------------------------------------------------------------- wrong credentials


def collect_client_leaks() -> None:
    """Collect, within this test, the sockets a client leaves behind after a failed start."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


def confluent_refused(bootstrap: str, pki: Pki, mechanism: str) -> str:
    from confluent_kafka import KafkaError, Producer

    errors: list[Any] = []
    producer = Producer({**confluent_settings(bootstrap, pki, mechanism, "wrong"),
                         "error_cb": errors.append, "log_level": 0})
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not any(e.code() == KafkaError._AUTHENTICATION for e in errors):
        producer.poll(0.1)
    producer.flush(0)
    auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert auth, f"no authentication error reported: {errors[:3]}"
    return str(auth[0].str())


def kafka_python_refused(bootstrap: str, pki: Pki, mechanism: str, caplog: pytest.LogCaptureFixture) -> str:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    with pytest.raises(KafkaError):
        KafkaProducer(**python_settings(bootstrap, pki, mechanism, "wrong"), ssl_cafile=str(pki.ca_file),
                      bootstrap_timeout_ms=3000)
    collect_client_leaks()
    return "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("kafka"))


def aiokafka_refused(bootstrap: str, pki: Pki, mechanism: str, caplog: pytest.LogCaptureFixture) -> str:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaConnectionError
    from aiokafka.helpers import create_ssl_context

    async def run() -> None:
        producer = AIOKafkaProducer(**python_settings(bootstrap, pki, mechanism, "wrong"),
                                    ssl_context=create_ssl_context(cafile=str(pki.ca_file)))
        try:
            with pytest.raises(KafkaConnectionError):
                await producer.start()
        finally:
            await producer.stop()
            await asyncio.sleep(0.1)  # let the refused connection's close callbacks run before the loop ends

    asyncio.run(run())
    collect_client_leaks()
    return "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("aiokafka"))


# After a failed authentication kafka-python (its selector's wake-up socket pair) and aiokafka (the
# refused connection's transport) leave sockets to the garbage collector, which pytest reports as
# unraisable ResourceWarnings.
_LEAKY_CLIENT = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("client", ["confluent-kafka", pytest.param("kafka-python", marks=_LEAKY_CLIENT),
                                    pytest.param("aiokafka", marks=_LEAKY_CLIENT)])
def test_wrong_password_is_refused_with_sasl_authentication_failed(
    secured: Any, client: str, mechanism: str, caplog: pytest.LogCaptureFixture
) -> None:
    broker, pki = secured
    expected = ("Invalid username or password" if mechanism == "PLAIN"
                else f"invalid credentials with SASL mechanism {mechanism}")
    with caplog.at_level(logging.INFO):
        if client == "confluent-kafka":
            text = confluent_refused(sasl_endpoint(broker), pki, mechanism)
        elif client == "kafka-python":
            text = kafka_python_refused(sasl_endpoint(broker), pki, mechanism, caplog)
        else:
            text = aiokafka_refused(sasl_endpoint(broker), pki, mechanism, caplog)
    assert expected in text, text
    broker_lines = [r.getMessage() for r in caplog.records if r.name in SASL_LOGGERS]
    assert any("authentication failed" in line for line in broker_lines)


def test_plaintext_client_on_the_sasl_port_gets_nothing_but_a_close(secured: Any) -> None:
    from confluent_kafka.admin import AdminClient

    broker, _pki = secured
    admin = AdminClient({"bootstrap.servers": sasl_endpoint(broker), "log_level": 0})
    with pytest.raises(Exception):  # noqa: B017 — librdkafka reports a transport failure
        admin.list_topics(timeout=2)
    with RawClient(broker.bootstrap) as c:  # and the broker still serves the PLAINTEXT listener
        create_topic(c, "still-serving")


def test_sasl_credentials_cannot_be_skipped_by_reusing_a_plaintext_advertised_address(
    secured: Any, tmp_path: Path
) -> None:
    """A client that bootstrapped over SASL_SSL is told the SASL_SSL address, never the PLAINTEXT one."""
    from confluent_kafka.admin import AdminClient

    broker, pki = secured
    admin = AdminClient(confluent_settings(sasl_endpoint(broker), pki, "SCRAM-SHA-256", PASSWORD))
    brokers = admin.list_topics(timeout=10).brokers
    assert [f"{b.host}:{b.port}" for b in brokers.values()] == [sasl_endpoint(broker)]
