"""The drain reads to each partition's high watermark, not to its last stable offset: a
transaction left open at the end of a run (a client stuck on a crashed broker) holds read_committed
back until the broker aborts it at its timeout, and a drain that stopped at the last stable offset
reported every record behind it as lost."""

from __future__ import annotations

from confluent_kafka import Producer

from bench.chaos.readers import end_offsets
from minikafka.testkit import MiniKafka


def test_end_offsets_are_high_watermarks_while_a_transaction_is_open() -> None:
    with MiniKafka() as kafka:
        topic = kafka.new_topic(partitions=1)
        plain = Producer({"bootstrap.servers": kafka.bootstrap})
        plain.produce(topic, b"before", partition=0)
        assert plain.flush(30) == 0
        txn = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": "drain-open"})
        txn.init_transactions(30)
        txn.begin_transaction()
        txn.produce(topic, b"held back", partition=0)
        assert txn.flush(30) == 0  # appended, the transaction still open: the last stable offset is 1
        plain.produce(topic, b"after", partition=0)
        assert plain.flush(30) == 0
        assert end_offsets(kafka.bootstrap, topic, 1) == {0: 3}
        txn.abort_transaction(30)
