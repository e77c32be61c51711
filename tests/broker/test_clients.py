"""Real clients produce to and consume from a broker over 127.0.0.1 (issue: broker core).

For confluent-kafka, kafka-python and aiokafka, each compression codec, and with the client's
default settings and with idempotence enabled: 10,000 keyed records with headers go to a
3-partition topic and come back exactly once, in per-partition order, with keys, values,
headers and timestamps intact.
"""

from __future__ import annotations

import pytest

from minikafka.broker.embedded import BrokerThread
from tests.client_helpers import CLIENTS, check_consumed, make_records, producer_config
from tests.kafka_wire import RawClient
from tests.scenario_helpers import create_topic

N = 10_000
CODECS = ["gzip", "snappy", "lz4", "zstd"]


@pytest.mark.parametrize("idempotent", [None, True], ids=["defaults", "idempotent"])
@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", list(CLIENTS))
def test_client_round_trip_keeps_every_record_once_in_order(
    broker: BrokerThread, topic_name: str, client: str, codec: str, idempotent: bool | None
) -> None:
    with RawClient(broker.bootstrap) as raw:
        create_topic(raw, topic_name, partitions=3)
    produce, consume = CLIENTS[client]
    records = make_records(N)
    produce(broker.bootstrap, topic_name, records, **producer_config(client, codec, idempotent))
    got = consume(broker.bootstrap, topic_name, 3, N)
    check_consumed(records, got)
