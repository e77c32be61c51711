"""Transactions with real clients (confluent-kafka, kafka-python, aiokafka): commit, abort,
offsets in a consume-transform-produce loop, fencing of an older instance and the timeout abort
of a producer that vanished. What each transaction left is read back twice: from the log (its
data batches and the COMMIT/ABORT markers that decide them) and with a read_committed consumer
of the same client library."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from minikafka.broker.embedded import BrokerThread
from minikafka.broker.transactions.metadata import TxnState
from tests.kafka_wire import RawClient, build_batch
from tests.scenario_helpers import clock_ahead, create_topic, produce
from tests.txn_clients import CLIENTS, TxnProducer, read_committed
from tests.txn_helpers import ABORT, COMMIT, init_pid, markers, offset_fetch, stored_batches, wait_state

S = TxnState


def decided(client: RawClient, topic: str, partitions: int) -> tuple[list[bytes], list[bytes], list[bytes]]:
    """(committed, aborted, still open) values of ``topic``, as a read_committed reader decides
    them: a producer's transactional batches belong to its next marker on the partition."""
    committed: list[bytes] = []
    aborted: list[bytes] = []
    still_open: list[bytes] = []
    for partition in range(partitions):
        pending: dict[int, list[bytes]] = {}
        for b in stored_batches(client, topic, partition):
            if b.is_control:
                values = pending.pop(b.producer_id, [])
                (committed if b.control_type == COMMIT else aborted).extend(values)
            elif b.attributes & 0x10:
                pending.setdefault(b.producer_id, []).extend(v for _k, v in b.records if v is not None)
            else:
                committed.extend(v for _k, v in b.records if v is not None)
        for values in pending.values():
            still_open.extend(values)
    return sorted(committed), sorted(aborted), sorted(still_open)




@pytest.fixture(params=list(CLIENTS))
def make(request: Any, broker: BrokerThread) -> Iterator[Callable[..., TxnProducer]]:
    made: list[TxnProducer] = []

    def start(txn_id: str, timeout_ms: int = 60000) -> TxnProducer:
        producer = CLIENTS[request.param](broker.bootstrap, txn_id, timeout_ms)
        made.append(producer)
        return producer

    start.client = request.param  # type: ignore[attr-defined]
    yield start
    for producer in made:
        try:
            producer.close()
        except Exception:
            pass  # a fenced producer may refuse to close cleanly


@pytest.fixture
def raw(broker: BrokerThread) -> Iterator[RawClient]:
    with RawClient(broker.bootstrap) as client:
        create_topic(client, "a", partitions=3)
        create_topic(client, "b", partitions=2)
        yield client


def test_commit_to_several_partitions_of_two_topics(make: Callable[..., TxnProducer], raw: RawClient,
                                                     broker: BrokerThread) -> None:
    txn_id = f"c-{uuid.uuid4().hex[:6]}"
    producer = make(txn_id)
    producer.begin()
    sent = []
    for i in range(6):
        value = f"v{i}".encode()
        producer.send("a" if i % 2 else "b", i % 2, value)
        sent.append(value)
    producer.send("a", 2, b"last")
    producer.commit()
    wait_state(broker, txn_id, S.COMPLETE_COMMIT)
    committed_a, aborted_a, open_a = decided(raw, "a", 3)
    committed_b, aborted_b, open_b = decided(raw, "b", 2)
    assert sorted(committed_a + committed_b) == sorted([*sent, b"last"])
    assert aborted_a == aborted_b == open_a == open_b == []
    client = make.client  # type: ignore[attr-defined]
    assert read_committed(client, broker.bootstrap, "a", 3) == committed_a
    assert read_committed(client, broker.bootstrap, "b", 2) == committed_b
    for topic, partition in (("a", 1), ("a", 2), ("b", 0)):
        (marker,) = markers(raw, topic, partition)
        assert marker[3] == COMMIT
    # a second transaction of the same producer
    producer.begin()
    producer.send("b", 1, b"second")
    producer.commit()
    wait_state(broker, txn_id, S.COMPLETE_COMMIT)
    assert b"second" in decided(raw, "b", 2)[0]


def test_abort_leaves_only_aborted_data(make: Callable[..., TxnProducer], raw: RawClient,
                                        broker: BrokerThread) -> None:
    txn_id = f"a-{uuid.uuid4().hex[:6]}"
    producer = make(txn_id)
    producer.begin()
    producer.send("a", 0, b"gone-1")
    producer.send("b", 1, b"gone-2")
    producer.abort()
    wait_state(broker, txn_id, S.COMPLETE_ABORT)
    producer.begin()
    producer.send("a", 0, b"kept")
    producer.commit()
    wait_state(broker, txn_id, S.COMPLETE_COMMIT)
    committed, aborted, still_open = decided(raw, "a", 3)
    assert (committed, aborted, still_open) == ([b"kept"], [b"gone-1"], [])
    assert decided(raw, "b", 2) == ([], [b"gone-2"], [])
    assert [m[3] for m in markers(raw, "a", 0)] == [ABORT, COMMIT]
    client = make.client  # type: ignore[attr-defined]
    assert read_committed(client, broker.bootstrap, "a", 3) == [b"kept"]
    assert read_committed(client, broker.bootstrap, "b", 2) == []


def test_offsets_in_a_consume_transform_produce_loop(make: Callable[..., TxnProducer], raw: RawClient,
                                                     broker: BrokerThread) -> None:
    group = f"g-{uuid.uuid4().hex[:6]}"
    for i in range(4):
        assert produce(raw, "b", build_batch(value=f"in-{i}".encode()), partition=0).error_code == 0
    txn_id = f"ctp-{uuid.uuid4().hex[:6]}"
    producer = make(txn_id)
    position = 0
    for round_ in range(2):  # two records per transaction
        producer.begin()
        for rec in stored_batches(raw, "b", 0)[position:position + 2]:
            producer.send("a", 0, rec.records[0][1].upper())
        position += 2
        producer.send_offsets({("b", 0): position}, group)
        assert offset_fetch(raw, group, ("b", 0), require_stable=True)[1] == 88
        if round_ == 0:
            producer.commit()
            wait_state(broker, txn_id, S.COMPLETE_COMMIT)
            assert offset_fetch(raw, group, ("b", 0)) == (2, 0)
        else:
            producer.abort()
            wait_state(broker, txn_id, S.COMPLETE_ABORT)
            assert offset_fetch(raw, group, ("b", 0), require_stable=True) == (2, 0)
    assert decided(raw, "a", 3) == ([b"IN-0", b"IN-1"], [b"IN-2", b"IN-3"], [])
    assert read_committed(make.client, broker.bootstrap, "a", 3) == [b"IN-0", b"IN-1"]  # type: ignore[attr-defined]
    assert [m[3] for m in markers(raw, "__consumer_offsets")] == [COMMIT, ABORT]


def test_a_second_instance_fences_the_first_and_aborts_its_transaction(
        make: Callable[..., TxnProducer], raw: RawClient, broker: BrokerThread) -> None:
    txn_id = f"f-{uuid.uuid4().hex[:6]}"
    old = make(txn_id)
    old.begin()
    old.send("a", 0, b"zombie")
    pid = broker.call(lambda: broker.broker.transactions.txns[txn_id].producer_id)
    new = make(txn_id)  # its InitProducerId aborts the open transaction with a higher epoch
    assert decided(raw, "a", 3) == ([], [b"zombie"], [])
    assert markers(raw, "a", 0) == [(1, pid, 1, ABORT)]
    with pytest.raises(Exception) as failed:
        old.commit()
    text = f"{type(failed.value).__name__} {failed.value}".lower()
    assert "fenced" in text or "epoch" in text, text
    new.begin()
    new.send("a", 0, b"fresh")
    new.commit()
    wait_state(broker, txn_id, S.COMPLETE_COMMIT)
    assert decided(raw, "a", 3) == ([b"fresh"], [b"zombie"], [])
    assert read_committed(make.client, broker.bootstrap, "a", 3) == [b"fresh"]  # type: ignore[attr-defined]


def test_a_vanished_producer_is_aborted_by_timeout_and_its_id_is_reusable(
        start_broker: Callable[..., BrokerThread]) -> None:
    broker = start_broker({"transaction.abort.timed.out.transaction.cleanup.interval.ms": 100})
    with RawClient(broker.bootstrap) as raw:
        create_topic(raw, "a", partitions=3)
        for name, client in CLIENTS.items():
            txn_id = f"v-{name}"
            gone = client(broker.bootstrap, txn_id, 5000)
            gone.begin()
            gone.send("a", 1, f"lost-{name}".encode())
            epoch = broker.call(lambda t=txn_id: broker.broker.transactions.txns[t].producer_epoch)
            with clock_ahead(broker.broker, 6000):
                wait_state(broker, txn_id, S.COMPLETE_ABORT)
            assert markers(raw, "a", 1)[-1][2:] == (epoch + 1, ABORT)
            again = client(broker.bootstrap, txn_id, 5000)
            again.begin()
            again.send("a", 1, f"kept-{name}".encode())
            again.commit()
            wait_state(broker, txn_id, S.COMPLETE_COMMIT)
            again.close()
            try:
                gone.close()
            except Exception:
                pass
        committed, aborted, still_open = decided(raw, "a", 3)
        assert committed == sorted(f"kept-{n}".encode() for n in CLIENTS)
        assert aborted == sorted(f"lost-{n}".encode() for n in CLIENTS)
        assert still_open == []
        for name in CLIENTS:
            assert read_committed(name, broker.bootstrap, "a", 3) == committed
        assert init_pid(raw, "v-confluent").error_code == 0


def test_kafka_python_admin_lists_and_describes_transactions(broker: BrokerThread, raw: RawClient) -> None:
    from kafka import KafkaAdminClient

    pid = init_pid(raw, "admin-seen").producer_id
    from tests.txn_helpers import add_partitions

    assert add_partitions(raw, "admin-seen", pid, 0, {"a": [2]}) == {("a", 2): 0}
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        listed = [t for per_broker in admin.list_transactions(state_filters=["Ongoing"]).values() for t in per_broker]
        assert [(t.transactional_id, t.producer_id) for t in listed] == [("admin-seen", pid)]
        assert admin.list_transactions(duration_filter_ms=3_600_000) == {broker.broker.node_id: []}
        described = admin.describe_transactions(["admin-seen"])["admin-seen"]
        assert (described.producer_id, described.producer_epoch, described.transaction_timeout_ms) == (pid, 0, 60000)
        assert {(tp.topic, tp.partition) for tp in described.topic_partitions} == {("a", 2)}
        assert str(described.state.value) == "Ongoing"
    finally:
        admin.close()
