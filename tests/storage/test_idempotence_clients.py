"""Real idempotent producers whose responses are lost after the append (issue: producer state).

A lossy proxy sits between client and broker and closes the connection instead of delivering
chosen Produce responses. The broker has appended those batches; the client retries them with
the same producer id, epoch and sequences, and the broker must answer from its duplicate cache.
Without idempotence the same fault leaves visible duplicates — shown too, so these tests can fail.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from minikafka.broker.embedded import BrokerThread
from tests.client_helpers import CLIENTS, Rec, check_consumed, make_records
from tests.kafka_wire import RawClient
from tests.scenario_helpers import create_topic
from tests.storage.lossy_proxy import LossyProxy

PRODUCE = 0
N = 3000


@pytest.fixture
def proxied(start_broker: Callable[..., BrokerThread]) -> Iterator[tuple[BrokerThread, LossyProxy]]:
    """A broker that advertises a lossy proxy in front of it."""
    port = LossyProxy.reserve_port()
    broker = start_broker(advertised_port=port)
    proxy = LossyProxy(target_port=broker.port).start(port)
    yield broker, proxy
    proxy.stop()


def retrying_config(client: str, idempotent: bool) -> dict[str, Any]:
    """Small batches (many requests), fast retries, and the idempotence choice."""
    if client == "confluent-kafka":
        return {"enable.idempotence": idempotent, "linger.ms": 2, "batch.num.messages": 100,
                "retry.backoff.ms": 20, "max.in.flight.requests.per.connection": 5, "retries": 100,
                "acks": "all"}
    config: dict[str, Any] = {"enable_idempotence": idempotent, "linger_ms": 2, "retry_backoff_ms": 20,
                              "acks": "all"}
    if client == "kafka-python":
        config.update(retries=100, max_in_flight_requests_per_connection=5, batch_size=8192)
    else:
        config.update(max_batch_size=8192)
    return config


def _produce_with_losses(broker: BrokerThread, proxy: LossyProxy, topic: str, client: str, idempotent: bool,
                         drop: Callable[[int], bool]) -> tuple[list[Any], list[Rec], int]:
    with RawClient(broker.bootstrap) as raw:
        create_topic(raw, topic, partitions=1)
    rule = proxy.drop(PRODUCE, drop)
    produce, consume = CLIENTS[client]
    records = make_records(N)
    bootstrap = f"127.0.0.1:{proxy.port}"
    produce(bootstrap, topic, records, **retrying_config(client, idempotent))
    assert rule.dropped >= 1, "the fault never fired: the test would prove nothing"
    got = consume(bootstrap, topic, 1, N, timeout=30)
    return records, got, rule.dropped


@pytest.mark.parametrize("client", list(CLIENTS))
def test_lost_produce_responses_are_retried_and_answered_from_duplicate_cache(
    proxied: tuple[BrokerThread, LossyProxy], topic_name: str, client: str
) -> None:
    broker, proxy = proxied
    records, got, dropped = _produce_with_losses(broker, proxy, topic_name, client, True,
                                                 lambda n: n in (3, 9, 15))
    check_consumed(records, got)
    counters = broker.broker.logs.get_log(topic_name, 0).producer_state.counters
    assert counters["duplicates"] >= 1, counters
    assert dropped == 3


def test_five_in_flight_with_one_lost_response_in_the_middle_keeps_exactly_once(
    proxied: tuple[BrokerThread, LossyProxy], topic_name: str
) -> None:
    broker, proxy = proxied
    records, got, _ = _produce_with_losses(broker, proxy, topic_name, "confluent-kafka", True, lambda n: n == 12)
    check_consumed(records, got)
    assert broker.broker.logs.get_log(topic_name, 0).producer_state.counters["duplicates"] >= 1


def test_without_idempotence_the_same_fault_leaves_visible_duplicates(
    proxied: tuple[BrokerThread, LossyProxy], topic_name: str
) -> None:
    broker, proxy = proxied
    records, got, _ = _produce_with_losses(broker, proxy, topic_name, "confluent-kafka", False,
                                           lambda n: n in (3, 9, 15))
    with pytest.raises(AssertionError, match="consumed twice"):
        check_consumed(records, got)
    assert broker.broker.logs.get_log(topic_name, 0).producer_state.counters["duplicates"] == 0
