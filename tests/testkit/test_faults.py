"""Every fault action, exercised through real Kafka clients against the fault-injecting broker.

The broker's own fault rules replace the lossy proxy of the idempotence tests: "append then
drop the response" makes an idempotent producer retry a batch that is already in the log, and
the broker must answer the retry from its duplicate cache. Each such test also shows the
opposite case (no idempotence, or a fault before the append) so that it can fail.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer

from minikafka.testkit import MiniKafka
from tests.client_helpers import CLIENTS, check_consumed, make_records


def confluent(bootstrap: str, idempotent: bool, **extra: Any) -> Producer:
    """A producer with fast retries, one small batch per request."""
    return Producer({
        "bootstrap.servers": bootstrap, "enable.idempotence": idempotent, "acks": "all",
        "linger.ms": 0, "retry.backoff.ms": 20, "retries": 50, "max.in.flight.requests.per.connection": 5,
        "message.timeout.ms": 30000, "log_level": 3, **extra,
    })


def send_one_by_one(producer: Producer, topic: str, values: list[bytes], partition: int = 0) -> list[Any]:
    """Produce each value in a request of its own (wait for each); return the delivery errors."""
    errors: list[Any] = []
    for value in values:
        producer.produce(topic, value=value, partition=partition,
                         on_delivery=lambda err, msg: errors.append(err) if err else None)
        assert producer.flush(30) == 0, "a record was not delivered within 30 s"
    return errors


def values_in_log(minikafka: MiniKafka, topic: str, partition: int = 0) -> list[bytes | None]:
    return [r.value for r in minikafka.records(topic, partition)]


VALUES = [f"v{i}".encode() for i in range(6)]


def check_retry_is_a_duplicate(minikafka: MiniKafka, topic: str, rule: Any) -> None:
    """An idempotent producer sends VALUES one by one; ``rule`` fires once after an append, so the
    client's retry is answered from the duplicate cache and the log holds each value once."""
    assert send_one_by_one(confluent(minikafka.bootstrap, idempotent=True), topic, VALUES) == []
    assert rule.fired == 1
    assert values_in_log(minikafka, topic) == VALUES
    assert minikafka.partition_state(topic)["counters"]["duplicates"] == 1


# ----------------------------------------------------------------------------- drop the response


@pytest.mark.parametrize("client", list(CLIENTS))
def test_append_then_drop_response_is_retried_and_answered_from_duplicate_cache(
    minikafka: MiniKafka, client: str
) -> None:
    topic = minikafka.new_topic()
    rule = minikafka.faults.drop_response(api="Produce", topic=topic, trigger="nth", n=3)
    records = make_records(600)
    produce, consume = CLIENTS[client]
    config: dict[str, Any] = (
        {"enable.idempotence": True, "batch.num.messages": 50, "retry.backoff.ms": 20, "acks": "all"}
        if client == "confluent-kafka" else {"enable_idempotence": True, "retry_backoff_ms": 20, "acks": "all"}
    )
    if client == "kafka-python":
        config["batch_size"] = 4096
    elif client == "aiokafka":
        config["max_batch_size"] = 4096
    produce(minikafka.bootstrap, topic, records, **config)
    assert rule.fired == 1
    check_consumed(records, consume(minikafka.bootstrap, topic, 1, len(records), timeout=30))
    assert len(minikafka.records(topic)) == len(records)  # the log itself holds one copy of each
    assert minikafka.partition_state(topic)["counters"]["duplicates"] >= 1


def test_append_then_drop_response_one_by_one_keeps_one_copy_with_idempotence(minikafka: MiniKafka) -> None:
    topic = minikafka.new_topic()
    rule = minikafka.faults.drop_response(api="Produce", topic=topic, trigger="nth", n=2)
    check_retry_is_a_duplicate(minikafka, topic, rule)


def test_append_then_drop_response_without_idempotence_leaves_a_visible_duplicate(minikafka: MiniKafka) -> None:
    topic = minikafka.new_topic()
    rule = minikafka.faults.drop_response(api="Produce", topic=topic, trigger="nth", n=2)
    assert send_one_by_one(confluent(minikafka.bootstrap, idempotent=False), topic, VALUES) == []
    assert rule.fired == 1
    # the second record was appended, its answer lost, and the retry appended it again
    assert values_in_log(minikafka, topic) == VALUES[:2] + VALUES[1:]
    assert minikafka.partition_state(topic)["counters"]["duplicates"] == 0


def test_held_response_times_the_client_out_and_its_retry_is_a_duplicate(minikafka: MiniKafka) -> None:
    topic = minikafka.new_topic()
    rule = minikafka.faults.drop_response(api="Produce", topic=topic, mode="hold", hold_ms=20_000,
                                          trigger="nth", n=2)
    producer = confluent(minikafka.bootstrap, idempotent=True, **{"request.timeout.ms": 1000,
                                                                  "socket.timeout.ms": 1000})
    started = time.monotonic()
    assert send_one_by_one(producer, topic, VALUES[:3]) == []
    elapsed = time.monotonic() - started
    assert rule.fired == 1
    assert 0.9 < elapsed < 15, f"the client should give up after its 1 s timeout, took {elapsed:.1f} s"
    assert values_in_log(minikafka, topic) == VALUES[:3]
    assert minikafka.partition_state(topic)["counters"]["duplicates"] == 1


# ----------------------------------------------------------------------------- errors


def test_append_then_error_is_retried_into_the_duplicate_cache(minikafka: MiniKafka) -> None:
    topic = minikafka.new_topic()
    rule = minikafka.faults.error_after("NOT_LEADER_OR_FOLLOWER", api="Produce", topic=topic, trigger="nth", n=2)
    check_retry_is_a_duplicate(minikafka, topic, rule)


def test_append_then_error_without_idempotence_duplicates(minikafka: MiniKafka) -> None:
    topic = minikafka.new_topic()
    minikafka.faults.error_after("NOT_LEADER_OR_FOLLOWER", api="Produce", topic=topic, trigger="nth", n=2)
    assert send_one_by_one(confluent(minikafka.bootstrap, idempotent=False), topic, VALUES) == []
    assert values_in_log(minikafka, topic) == VALUES[:2] + VALUES[1:]


def test_error_before_append_is_retried_and_appends_once(minikafka: MiniKafka) -> None:
    topic = minikafka.new_topic()
    rule = minikafka.faults.error_before("NOT_LEADER_OR_FOLLOWER", api="Produce", topic=topic, trigger="next", n=3)
    assert send_one_by_one(confluent(minikafka.bootstrap, idempotent=False), topic, VALUES) == []
    assert rule.fired == 3
    assert values_in_log(minikafka, topic) == VALUES  # nothing was appended by the refused attempts
    assert minikafka.partition_state(topic)["counters"]["duplicates"] == 0


def test_error_before_with_a_fatal_error_fails_the_delivery_and_appends_nothing(minikafka: MiniKafka) -> None:
    topic = minikafka.new_topic()
    rule = minikafka.faults.error_before("TOPIC_AUTHORIZATION_FAILED", api="Produce", topic=topic)
    errors = send_one_by_one(confluent(minikafka.bootstrap, idempotent=False, retries=0), topic, VALUES[:1])
    assert rule.fired == 1
    assert [e.name() for e in errors] == ["TOPIC_AUTHORIZATION_FAILED"]
    assert values_in_log(minikafka, topic) == []


def test_error_before_on_one_partition_leaves_the_others_alone(minikafka: MiniKafka) -> None:
    from tests.kafka_wire import RawClient, build_batch, produce_request

    topic = minikafka.new_topic(partitions=3)
    minikafka.faults.error_before("NOT_LEADER_OR_FOLLOWER", api="Produce", topic=topic, partition=1)
    request = produce_request(topic, 0, build_batch(value=b"p0"))
    Partition = type(request.topic_data[0].partition_data[0])
    request.topic_data[0].partition_data += [Partition(index=1, records=build_batch(value=b"p1")),
                                             Partition(index=2, records=build_batch(value=b"p2"))]
    with RawClient(minikafka.bootstrap) as client:
        response = client.request(request)
    answers = [(p.index, p.error_code, p.base_offset) for p in response.responses[0].partition_responses]
    assert answers == [(0, 0, 0), (1, 6, -1), (2, 0, 0)]  # in the request's order
    assert [values_in_log(minikafka, topic, p) for p in range(3)] == [[b"p0"], [], [b"p2"]]


def test_error_before_on_fetch_makes_the_consumer_retry(minikafka: MiniKafka) -> None:
    from confluent_kafka import Consumer, TopicPartition

    topic = minikafka.new_topic()
    send_one_by_one(confluent(minikafka.bootstrap, idempotent=True), topic, VALUES)
    rule = minikafka.faults.error_before("NOT_LEADER_OR_FOLLOWER", api="Fetch", topic=topic, trigger="next", n=2)
    consumer = Consumer({"bootstrap.servers": minikafka.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "log_level": 3})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 20
    try:
        while len(got) < len(VALUES) and time.monotonic() < deadline:
            for msg in consumer.consume(10, timeout=0.5):
                assert msg.error() is None, msg.error()
                got.append(msg.value())
    finally:
        consumer.close()
    assert rule.fired == 2
    assert got == VALUES


@pytest.mark.parametrize("action", ["error_before", "error_after"])
def test_a_fetch_rule_for_a_topic_matches_fetches_by_topic_id(minikafka: MiniKafka, action: str) -> None:
    """Fetch v13+ names topics by id (librdkafka sends v16): a rule for a topic name matches them
    through the topic's id and answers that topic's partitions only."""
    from tests.fetch_wire import fetch_request, topic_id
    from tests.kafka_wire import RawClient

    hit, spared = minikafka.new_topic(), minikafka.new_topic()
    for topic in (hit, spared):
        send_one_by_one(confluent(minikafka.bootstrap, idempotent=True), topic, VALUES[:1])
    rule = minikafka.faults.add(action, api="Fetch", topic=hit, error="NOT_LEADER_OR_FOLLOWER", trigger="always")
    with RawClient(minikafka.bootstrap) as c:
        ids = {topic_id(c, hit): hit, topic_id(c, spared): spared}
        answer = c.request(fetch_request(16, [(tid, [0]) for tid in ids]))
    errors = {ids[t.topic_id]: t.partitions[0].error_code for t in answer.responses}
    assert errors == {hit: 6, spared: 0}
    assert rule.fired == 1


# ----------------------------------------------------------------------------- delay and close


def test_delay_answers_late_but_correctly(minikafka: MiniKafka) -> None:
    topic = minikafka.new_topic()
    producer = confluent(minikafka.bootstrap, idempotent=True)
    send_one_by_one(producer, topic, VALUES[:1])  # connection and producer id set up
    rule = minikafka.faults.delay(400, api="Produce", topic=topic)
    started = time.monotonic()
    send_one_by_one(producer, topic, VALUES[1:2])
    delayed = time.monotonic() - started
    started = time.monotonic()
    send_one_by_one(producer, topic, VALUES[2:3])
    normal = time.monotonic() - started
    assert rule.fired == 1
    assert delayed >= 0.4 and normal < 0.3, (delayed, normal)
    assert values_in_log(minikafka, topic) == VALUES[:3]


def test_close_before_handling_appends_nothing_and_the_client_reconnects(minikafka: MiniKafka) -> None:
    topic = minikafka.new_topic()
    rule = minikafka.faults.close_connection(api="Produce", topic=topic, trigger="nth", n=2)
    assert send_one_by_one(confluent(minikafka.bootstrap, idempotent=False), topic, VALUES) == []
    assert rule.fired == 1
    assert values_in_log(minikafka, topic) == VALUES  # without idempotence, still no duplicate
    assert minikafka.metrics().count("minikafka_connections_total") >= 1


def test_close_matches_by_client_id_only(minikafka: MiniKafka) -> None:
    topic = minikafka.new_topic()
    rule = minikafka.faults.close_connection(api="Produce", client_id="victim-*", trigger="always")
    assert send_one_by_one(confluent(minikafka.bootstrap, False, **{"client.id": "bystander"}), topic,
                           VALUES[:2]) == []
    assert rule.fired == 0
    victim = confluent(minikafka.bootstrap, False, **{"client.id": "victim-1", "message.timeout.ms": 1500})
    victim.produce(topic, value=b"lost")
    victim.flush(10)
    assert rule.fired >= 1
    assert values_in_log(minikafka, topic) == VALUES[:2]


def test_acks_zero_produce_with_error_before_closes_the_connection(minikafka: MiniKafka) -> None:
    from tests.kafka_wire import RawClient, build_batch, produce_request

    topic = minikafka.new_topic()
    minikafka.faults.error_before(api="Produce", topic=topic)
    with RawClient(minikafka.bootstrap) as client:
        client.send(produce_request(topic, 0, build_batch(), acks=0))
        assert client.is_closed_by_peer()
    assert values_in_log(minikafka, topic) == []


# ----------------------------------------------------------------------------- crash and lifecycle


def test_crash_after_append_then_restart_answers_the_retry_from_recovered_state(minikafka: MiniKafka) -> None:
    topic = minikafka.new_topic()
    producer = confluent(minikafka.bootstrap, idempotent=True, **{"reconnect.backoff.ms": 20,
                                                                  "reconnect.backoff.max.ms": 100})
    send_one_by_one(producer, topic, VALUES[:2])
    rule = minikafka.faults.crash(restart_after_ms=300, api="Produce", topic=topic)
    assert send_one_by_one(producer, topic, VALUES[2:]) == []
    assert rule.fired == 1
    assert minikafka.running
    # v2 was appended before the crash; its retry after recovery is a duplicate, not a second copy
    assert values_in_log(minikafka, topic) == VALUES
    assert minikafka.partition_state(topic)["counters"]["duplicates"] == 1


def test_crash_and_start_again_keeps_the_port_and_every_acknowledged_record(minikafka: MiniKafka) -> None:
    topic = minikafka.new_topic(partitions=2)
    bootstrap = minikafka.bootstrap
    records = make_records(200)
    CLIENTS["confluent-kafka"][0](bootstrap, topic, records, **{"enable.idempotence": True})
    minikafka.crash()
    assert not minikafka.running
    with pytest.raises(KafkaException):
        Producer({"bootstrap.servers": bootstrap, "log_level": 0}).list_topics(timeout=0.5)
    minikafka.start_again()
    assert minikafka.bootstrap == bootstrap
    more = make_records(300)[200:]
    CLIENTS["confluent-kafka"][0](bootstrap, topic, more, **{"enable.idempotence": True})
    check_consumed(records + more, CLIENTS["confluent-kafka"][1](bootstrap, topic, 2, 300, timeout=30))


def test_clean_restart_keeps_producer_state(minikafka: MiniKafka) -> None:
    topic = minikafka.new_topic()
    send_one_by_one(confluent(minikafka.bootstrap, idempotent=True), topic, VALUES)
    before = minikafka.partition_state(topic)["producers"]
    minikafka.restart(clean=True)
    assert minikafka.partition_state(topic)["producers"] == before
    assert values_in_log(minikafka, topic) == VALUES


def test_roll_segment_now_starts_a_segment_and_writes_a_snapshot(minikafka: MiniKafka) -> None:
    topic = minikafka.new_topic()
    send_one_by_one(confluent(minikafka.bootstrap, idempotent=True), topic, VALUES[:3])
    assert minikafka.roll_segment(topic) == [f"{topic}-0"]
    state = minikafka.partition_state(topic)
    assert state["segments"] == [0, 3]
    assert (minikafka.data_dir / f"{topic}-0" / "00000000000000000003.snapshot").exists()
    assert "minikafka_producer_state_snapshots_written_total 1" in minikafka.metrics()
    assert minikafka.roll_segment(topic) == []  # the new segment is empty: nothing to roll


def test_expire_producers_now_forgets_them_and_the_producer_carries_on(minikafka: MiniKafka) -> None:
    topic = minikafka.new_topic()
    producer = confluent(minikafka.bootstrap, idempotent=True)
    send_one_by_one(producer, topic, VALUES[:3])
    assert len(minikafka.partition_state(topic)["producers"]) == 1
    assert minikafka.expire_producers(topic) == 1
    state = minikafka.partition_state(topic)
    assert state["producers"] == {} and state["counters"]["expired"] == 1
    # an unknown producer may continue at any sequence (KIP-360): nothing is lost or refused
    assert send_one_by_one(producer, topic, VALUES[3:]) == []
    assert values_in_log(minikafka, topic) == VALUES


# ----------------------------------------------------------------------------- triggers


@pytest.mark.parametrize(("trigger", "n", "fires_on"), [
    ("once", None, [1]),
    ("next", 2, [1, 2]),
    ("every", 3, [3, 6]),
    ("nth", 4, [4]),
    ("always", None, [1, 2, 3, 4, 5, 6, 7]),
])
def test_triggers_fire_on_the_right_requests(minikafka: MiniKafka, trigger: str, n: int | None,
                                             fires_on: list[int]) -> None:
    from tests.kafka_wire import RawClient, build_batch, partition_response, produce_request

    topic = minikafka.new_topic()
    other = minikafka.new_topic()
    rule = minikafka.faults.error_before("REQUEST_TIMED_OUT", api="Produce", topic=topic, trigger=trigger, n=n)
    errors = []
    with RawClient(minikafka.bootstrap) as client:
        for i in range(1, 8):
            # requests to another topic do not count as matches
            assert partition_response(client.request(produce_request(other, 0, build_batch()))).error_code == 0
            answer = partition_response(client.request(produce_request(topic, 0, build_batch())))
            if answer.error_code:
                assert answer.error_code == 7
                errors.append(i)
    assert errors == fires_on
    assert (rule.matched, rule.fired) == (7, len(fires_on))


def test_first_firing_rule_wins_and_later_rules_do_not_count_the_request(minikafka: MiniKafka) -> None:
    from tests.kafka_wire import RawClient, build_batch, partition_response, produce_request

    topic = minikafka.new_topic()
    first = minikafka.faults.error_before("REQUEST_TIMED_OUT", api="Produce", trigger="once")
    second = minikafka.faults.error_before("NOT_LEADER_OR_FOLLOWER", api="Produce", trigger="always")
    with RawClient(minikafka.bootstrap) as client:
        codes = [partition_response(client.request(produce_request(topic, 0, build_batch()))).error_code
                 for _ in range(3)]
    assert codes == [7, 6, 6]
    assert (first.fired, second.matched, second.fired) == (1, 2, 2)
    assert Counter(r.id for r in minikafka.faults.rules) == {first.id: 1, second.id: 1}


def test_error_before_on_init_producer_id_is_retried_until_the_producer_gets_its_id(minikafka: MiniKafka) -> None:
    topic = minikafka.new_topic()
    rule = minikafka.faults.error_before("COORDINATOR_LOAD_IN_PROGRESS", api="InitProducerId", trigger="next", n=2)
    assert send_one_by_one(confluent(minikafka.bootstrap, idempotent=True), topic, VALUES[:1]) == []
    assert rule.fired == 2  # a retriable error: the producer asked again and got its id
    assert values_in_log(minikafka, topic) == VALUES[:1]


def test_invalid_rules_are_refused_with_a_reason(minikafka: MiniKafka) -> None:
    from minikafka.testkit.faults import FaultRuleError

    for spec, reason in [
        ({"action": "explode"}, "action must be one of"),
        ({"action": "close", "trigger": "sometimes"}, "trigger must be one of"),
        ({"action": "close", "trigger": "nth", "n": 0}, "positive integer"),
        ({"action": "error_before", "error": "NO_SUCH_ERROR"}, "unknown error code"),
        ({"action": "close", "api": "Frobnicate"}, "unknown API"),
        ({"action": "close", "api": "Prodcue"}, "unknown API 'Prodcue'; did you mean Produce\\?"),
        ({"action": "close", "api": 99}, "does not serve API key 99"),
        ({"action": "delay"}, "delay_ms > 0"),
        ({"action": "close", "colour": "red"}, "unknown rule field"),
        ({"action": "drop_response", "mode": "sometimes"}, "mode must be"),
    ]:
        with pytest.raises(FaultRuleError, match=reason):
            minikafka.faults.add_all([spec])
    assert minikafka.faults.rules == []


def test_error_before_on_create_topics_refuses_only_the_matched_topic(minikafka: MiniKafka) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    rule = minikafka.faults.error_before("TOPIC_AUTHORIZATION_FAILED", api="CreateTopics", topic="secret-*")
    admin = AdminClient({"bootstrap.servers": minikafka.bootstrap, "log_level": 3})
    futures = admin.create_topics([NewTopic("secret-a", 1), NewTopic("public-a", 2)], operation_timeout=5)
    futures["public-a"].result(10)
    with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED"):
        futures["secret-a"].result(10)
    assert rule.fired == 1
    assert minikafka.topics() == {"public-a": 2}  # the refused topic was never created


def test_error_after_on_metadata_reports_the_topic_error_to_the_client(minikafka: MiniKafka) -> None:
    topic = minikafka.new_topic()
    rule = minikafka.faults.error_after("LEADER_NOT_AVAILABLE", api="Metadata", topic=topic, trigger="always")
    metadata = Producer({"bootstrap.servers": minikafka.bootstrap, "log_level": 0}).list_topics(topic, timeout=5)
    assert rule.fired >= 1
    assert metadata.topics[topic].error is not None
    assert metadata.topics[topic].error.name() == "LEADER_NOT_AVAILABLE"


def test_a_list_of_rules_is_added_whole_or_not_at_all(minikafka: MiniKafka) -> None:
    from minikafka.testkit.faults import FaultRuleError

    minikafka.faults.close_connection(id="taken")
    with pytest.raises(FaultRuleError, match="exists already"):
        minikafka.faults.add_all([{"action": "close", "id": "new"}, {"action": "close", "id": "taken"}])
    with pytest.raises(FaultRuleError, match="exists already"):
        minikafka.faults.add_all([{"action": "close", "id": "twice"}, {"action": "close", "id": "twice"}])
    added = minikafka.faults.add_all([{"action": "close", "id": "r1"}, {"action": "close"}])
    assert [r.id for r in minikafka.faults.rules] == ["taken", "r1", added[1].id]
    assert added[1].id not in ("taken", "r1")


def test_a_rule_file_is_checked_whole_and_its_errors_are_fault_rule_errors(tmp_path: Path) -> None:
    from minikafka.testkit import FaultFileRuleError, FaultRuleError, load_rules

    good = tmp_path / "good.yaml"
    good.write_text("rules:\n  - action: close\n    api: [produce, 1]\n")
    assert load_rules(good) == [{"action": "close", "api": ["produce", 1]}]
    for name, text, reason in [
        ("typo.yaml", "- action: close\n- action: close\n  api: Prodcue\n",
         r"typo.yaml: rule 2: unknown API 'Prodcue'; did you mean Produce\?"),
        ("key.json", '{"action": "close", "api": 99}', "key.json: rule 1: minikafka does not serve API key 99"),
        ("broken.yaml", "- action: close\n  api: [Produce\n", r"broken.yaml: not valid YAML: .*\(line 3, column 1\)"),
        ("broken.json", "[{", "broken.json: not valid JSON"),
    ]:
        (tmp_path / name).write_text(text)
        with pytest.raises(FaultFileRuleError, match=reason) as raised:
            load_rules(tmp_path / name)
        assert isinstance(raised.value, FaultRuleError) and raised.value.path == str(tmp_path / name)
    with pytest.raises(FileNotFoundError):
        load_rules(tmp_path / "missing.yaml")


def test_a_broker_given_a_bad_rule_does_not_start(tmp_path: Path) -> None:
    from minikafka.testkit.faults import FaultRuleError

    kafka = MiniKafka(data_dir=tmp_path / "data", faults=[{"action": "close"}, {"action": "close", "api": "Fecth"}])
    with pytest.raises(FaultRuleError, match="rule 2: unknown API 'Fecth'; did you mean Fetch\\?"):
        kafka.start()
    assert not kafka.running


def test_fault_rules_know_the_kip_848_apis(minikafka: MiniKafka) -> None:
    """error_before on ConsumerGroupHeartbeat answers in that API's own shape; the retried heartbeat
    (as a client does after NOT_COORDINATOR) joins; ConsumerGroupDescribe can be failed too."""
    from tests.groups.consumer_group_wire import describe, join
    from tests.kafka_wire import RawClient

    heartbeat = minikafka.faults.error_before("NOT_COORDINATOR", api="ConsumerGroupHeartbeat", trigger="once")
    described = minikafka.faults.error_before("COORDINATOR_LOAD_IN_PROGRESS", api="consumergroupdescribe",
                                              trigger="once")
    with RawClient(minikafka.bootstrap) as c:
        first = join(c, "g", "m", [])
        assert (first.error_code, first.member_id, first.assignment) == (16, None, None)
        again = join(c, "g", "m", [])
        assert (again.error_code, again.member_id, again.member_epoch) == (0, "m", 1)
        assert [g.error_code for g in describe(c, "g", "h")] == [14, 14]
        assert [g.error_code for g in describe(c, "g")] == [0]
    assert (heartbeat.fired, described.fired) == (1, 1)
