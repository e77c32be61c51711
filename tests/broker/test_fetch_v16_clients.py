"""librdkafka (confluent-kafka) fetches with Fetch v16, by topic id, now that minikafka offers it as
Kafka 4.0 does: each test reads which versions its consumer sent from librdkafka's own protocol
log and checks that consuming, seeking, read_committed and a topic created again under its name
(a new topic id) work on that path."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from minikafka.broker.embedded import BrokerThread
from tests.fetch_wire import ProtocolLog, poll_values


@pytest.fixture
def protocol_log(request: pytest.FixtureRequest) -> Iterator[ProtocolLog]:
    log = ProtocolLog(f"librdkafka-{request.node.name}")
    yield log
    log.close_log()


def consumer(broker: BrokerThread, log: ProtocolLog, **config: Any) -> Consumer:
    return Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g", "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "debug": "protocol", "logger": log.logger, **config})


def produce(broker: BrokerThread, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    for v in values:
        p.produce(topic, value=v)
    assert p.flush(30) == 0


def test_a_consumer_fetches_with_v16_and_reads_and_seeks(broker: BrokerThread, protocol_log: ProtocolLog) -> None:
    values = [f"v{i}".encode() for i in range(10)]
    produce(broker, "plain", values)
    c = consumer(broker, protocol_log)
    try:
        c.subscribe(["plain"])
        assert poll_values(c, 10) == values
        c.seek(TopicPartition("plain", 0, 3))
        assert poll_values(c, 7) == values[3:]
    finally:
        c.close()
    assert protocol_log.fetch_versions() == {16}


def test_a_read_committed_consumer_on_v16_sees_committed_transactions_only(
        broker: BrokerThread, protocol_log: ProtocolLog) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "fetch-v16"})
    p.init_transactions(30)
    for batch, commit in ((b"a", True), (b"b", False), (b"c", True)):
        p.begin_transaction()
        for i in range(3):
            p.produce("txn", value=batch + str(i).encode())
        (p.commit_transaction if commit else p.abort_transaction)(30)
    c = consumer(broker, protocol_log, **{"isolation.level": "read_committed"})
    try:
        c.subscribe(["txn"])
        assert poll_values(c, 6) == [b"a0", b"a1", b"a2", b"c0", b"c1", b"c2"]
        assert c.poll(1) is None  # nothing aborted follows
    finally:
        c.close()
    assert protocol_log.fetch_versions() == {16}


def test_a_topic_created_again_under_its_name_is_read_by_its_new_id(
        start_broker: Callable[..., BrokerThread], protocol_log: ProtocolLog) -> None:
    broker = start_broker()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def create() -> None:
        for future in admin.create_topics([NewTopic("again", 1, 1)]).values():
            future.result(30)

    create()
    produce(broker, "again", [b"old-0", b"old-1", b"old-2"])
    c = consumer(broker, protocol_log, **{"topic.metadata.refresh.interval.ms": 1000})
    try:
        c.subscribe(["again"])
        assert poll_values(c, 3) == [b"old-0", b"old-1", b"old-2"]
        for future in admin.delete_topics(["again"]).values():
            future.result(30)
        create()
        produce(broker, "again", [b"new-0", b"new-1"])
        # librdkafka sees the new topic id in Metadata and reads the new log from its start
        assert poll_values(c, 2) == [b"new-0", b"new-1"]
    finally:
        c.close()
    assert protocol_log.fetch_versions() == {16}
