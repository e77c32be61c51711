"""One default partition count everywhere: a topic made without one gets ``num.partitions``,
whether it comes from CreateTopics, auto-creation, ``MiniKafka.create_topic`` or the HTTP admin
endpoint (tested in test_admin_http.py)."""

from __future__ import annotations

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from minikafka.testkit import MiniKafka


def test_every_way_to_make_a_topic_without_a_count_gets_num_partitions() -> None:
    with MiniKafka(config={"num.partitions": 3}) as kafka:
        kafka.create_topic("by-api")
        named = kafka.new_topic()
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
        admin.create_topics([NewTopic("by-create-topics")])["by-create-topics"].result(10)
        producer = Producer({"bootstrap.servers": kafka.bootstrap})
        producer.produce("by-auto-creation", value=b"v")
        assert producer.flush(10) == 0
        kafka.create_topic("explicit", partitions=2)
        assert kafka.topics() == {"by-api": 3, named: 3, "by-create-topics": 3, "by-auto-creation": 3,
                                  "explicit": 2}
