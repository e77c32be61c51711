"""``GET /metrics``: Prometheus text that prometheus_client's parser reads, with numbers that
follow what the broker did."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from minikafka.testkit import MiniKafka
from tests.testkit.test_faults import VALUES, confluent, send_one_by_one


def scrape(kafka: MiniKafka) -> dict[str, Any]:
    """name -> family, parsed from the admin endpoint's /metrics."""
    assert kafka.admin_url is not None
    with urllib.request.urlopen(kafka.admin_url + "/metrics", timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = response.read().decode()
    return {family.name: family for family in text_string_to_metric_families(text)}


def value(families: dict[str, Any], name: str, **labels: str) -> float:
    """The one sample called ``name`` with ``labels``."""
    matches = [s.value for family in families.values() for s in family.samples
               if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(matches) == 1, (name, labels, matches)
    return matches[0]


@pytest.fixture
def kafka(minikafka_factory: Callable[..., MiniKafka]) -> MiniKafka:
    return minikafka_factory(admin_port=0)


def test_metrics_parse_and_count_requests_records_and_duplicates(kafka: MiniKafka) -> None:
    topic = kafka.new_topic()
    rule = kafka.faults.drop_response(api="Produce", topic=topic, trigger="nth", n=2)
    before = scrape(kafka)
    assert value(before, "minikafka_up") == 1
    assert value(before, "minikafka_records_appended_total") == 0
    assert send_one_by_one(confluent(kafka.bootstrap, idempotent=True), topic, VALUES) == []
    after = scrape(kafka)
    assert value(after, "minikafka_records_appended_total") == len(VALUES)
    assert value(after, "minikafka_batches_appended_total") == len(VALUES)
    assert value(after, "minikafka_producer_duplicates_total", topic=topic, partition="0") == 1
    assert value(after, "minikafka_producer_out_of_order_total", topic=topic, partition="0") == 0
    assert value(after, "minikafka_producer_fenced_total", topic=topic, partition="0") == 0
    assert value(after, "minikafka_fault_rule_fired_total", rule=rule.id, action="drop_response") == 1
    assert value(after, "minikafka_fault_rule_matched_total", rule=rule.id, action="drop_response") >= 2
    assert value(after, "minikafka_log_end_offset", topic=topic, partition="0") == len(VALUES)
    assert value(after, "minikafka_producers_active", topic=topic, partition="0") == 1
    # every answered Produce is counted; the dropped one was not answered
    produce_count = value(after, "minikafka_requests_total", api="Produce")
    assert produce_count == len(VALUES)  # 6 answered: 5 first tries + the retry of the dropped one
    assert value(after, "minikafka_request_duration_seconds_count", api="Produce") == produce_count
    assert value(after, "minikafka_request_duration_seconds_sum", api="Produce") > 0
    assert value(after, "minikafka_requests_total", api="Metadata") >= 1
    assert value(after, "minikafka_received_bytes_total") > value(before, "minikafka_received_bytes_total")
    assert value(after, "minikafka_sent_bytes_total") > value(before, "minikafka_sent_bytes_total")
    assert value(after, "minikafka_connections_total") >= 2  # the dropped response closed one


def test_metrics_count_rejections_by_producer_state(kafka: MiniKafka) -> None:
    from tests.kafka_wire import RawClient, build_batch, partition_response, produce_request

    topic = kafka.new_topic()
    with RawClient(kafka.bootstrap) as client:
        def send(epoch: int, seq: int) -> int:
            batch = build_batch(producer_id=7, epoch=epoch, base_sequence=seq)
            return partition_response(client.request(produce_request(topic, 0, batch))).error_code

        assert [send(1, 0), send(1, 5), send(0, 1), send(1, 0)] == [0, 45, 47, 0]
    families = scrape(kafka)
    assert value(families, "minikafka_producer_out_of_order_total", topic=topic, partition="0") == 1
    assert value(families, "minikafka_producer_fenced_total", topic=topic, partition="0") == 1
    assert value(families, "minikafka_producer_duplicates_total", topic=topic, partition="0") == 1
    kafka.expire_producers()
    assert value(scrape(kafka), "minikafka_producer_expired_total", topic=topic, partition="0") == 1


def test_metrics_show_snapshots_recovery_connections_and_a_crash(kafka: MiniKafka) -> None:
    from tests.kafka_wire import RawClient

    topic = kafka.new_topic()
    assert send_one_by_one(confluent(kafka.bootstrap, idempotent=True), topic, VALUES[:2]) == []
    kafka.roll_segment(topic)
    families = scrape(kafka)
    assert value(families, "minikafka_producer_state_snapshots_written_total") == 1
    assert value(families, "minikafka_recovery_seconds") >= 0
    with RawClient(kafka.bootstrap), RawClient(kafka.bootstrap):
        # connect() returns once the kernel accepted; the broker counts the connection when its loop
        # takes it, which may be after the scrape's request (the admin endpoint answers in one turn)
        deadline = time.monotonic() + 10
        while (active := value(scrape(kafka), "minikafka_connections_active")) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert active >= 2
    kafka.crash()
    down = scrape(kafka)
    assert value(down, "minikafka_up") == 0
    assert "minikafka_log_end_offset" not in {s.name for f in down.values() for s in f.samples}
    kafka.start_again()
    up = scrape(kafka)
    assert value(up, "minikafka_up") == 1
    assert value(up, "minikafka_recovery_seconds") > 0
    assert value(up, "minikafka_log_end_offset", topic=topic, partition="0") == 2
    assert send_one_by_one(confluent(kafka.bootstrap, idempotent=True), topic, VALUES[2:3]) == []
    kafka.restart(clean=True)  # a clean stop writes a snapshot at the new log end
    assert value(scrape(kafka), "minikafka_producer_state_snapshots_written_total") >= 2
