"""Fault rules select the transaction APIs by name; the HTTP admin lists transactions."""

from __future__ import annotations

import json
import urllib.request

import pytest

from minikafka.testkit import MiniKafka
from tests.kafka_wire import RawClient
from tests.txn_helpers import COMMIT, add_partitions, end_txn, init_pid, markers, txn_records


def test_error_before_add_partitions_adds_nothing(minikafka: MiniKafka) -> None:
    topic = minikafka.new_topic(partitions=2)
    rule = minikafka.faults.error_before("COORDINATOR_LOAD_IN_PROGRESS", api="AddPartitionsToTxn")
    with RawClient(minikafka.bootstrap) as client:
        init = init_pid(client, "faulty")
        pid = init.producer_id
        assert add_partitions(client, "faulty", pid, 0, {topic: [0, 1]}) == {(topic, 0): 14, (topic, 1): 14}
        assert rule.fired == 1
        assert [r.state for r in txn_records(client, "faulty")] == [0]  # still only Empty
        assert add_partitions(client, "faulty", pid, 0, {topic: [0, 1]}) == {(topic, 0): 0, (topic, 1): 0}


def test_end_txn_answer_dropped_after_the_markers_then_the_retry_succeeds(minikafka: MiniKafka) -> None:
    topic = minikafka.new_topic()
    rule = minikafka.faults.drop_response(api="EndTxn")
    with RawClient(minikafka.bootstrap) as client:
        init = init_pid(client, "dropped")
        pid, epoch = init.producer_id, init.producer_epoch
        assert add_partitions(client, "dropped", pid, epoch, {topic: [0]}) == {(topic, 0): 0}
        try:
            end_txn(client, "dropped", pid, epoch, commit=True)
            raise AssertionError("the EndTxn answer should have been dropped")
        except ConnectionError:
            pass
    assert rule.fired == 1
    with RawClient(minikafka.bootstrap) as client:
        for _ in range(500):  # the retry gets 51 while the markers are written, then NONE
            code = end_txn(client, "dropped", pid, epoch, commit=True)
            if code != 51:
                break
        assert code == 0
        assert markers(client, topic) == [(0, pid, epoch, COMMIT)]
        assert [r.state for r in txn_records(client, "dropped")] == [0, 1, 2, 4]


@pytest.mark.minikafka(admin_port=0)
def test_admin_http_lists_transactions(minikafka: MiniKafka) -> None:
    topic = minikafka.new_topic()
    assert minikafka.admin_url is not None
    with RawClient(minikafka.bootstrap) as client:
        init = init_pid(client, "listed")
        add_partitions(client, "listed", init.producer_id, 0, {topic: [0]})
    with urllib.request.urlopen(minikafka.admin_url + "/transactions", timeout=10) as response:
        body = json.loads(response.read())
    (txn,) = [t for t in body["transactions"] if t["transactional_id"] == "listed"]
    assert (txn["state"], txn["producer_id"], txn["producer_epoch"], txn["partitions"]) == (
        "Ongoing", init.producer_id, 0, [f"{topic}-0"])
    assert 0 <= txn["kafka_partition"] < 50
