"""An unclean election on a cluster in a box, seen by real clients: a replica falls out of the ISR,
the brokers that had the newer records crash, the stale replica is started and leads. Exactly the
records above its log end are lost, acks=all ones included, and consumers already positioned past
the new log end find out: confluent-kafka and kafka-python validate their position with
OffsetForLeaderEpoch (KIP-320) and go back to where the logs diverge; aiokafka does not validate,
gets OFFSET_OUT_OF_RANGE and resets by its ``auto_offset_reset`` policy. With no policy each client
reports what it found."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

import pytest
from aiokafka.errors import OffsetOutOfRangeError
from confluent_kafka import KafkaError, Producer
from kafka.errors import LogTruncationError
from kafka.errors import OffsetOutOfRangeError as KafkaPythonOffsetOutOfRange

from minikafka.testkit import MiniKafkaCluster
from tests.client_helpers import AiokafkaReader, ConfluentReader, KafkaPythonReader, kafka_python_read_to_end


def write(cluster: MiniKafkaCluster, topic: str, values: list[bytes], acks: str) -> dict[int, bytes]:
    """Write ``values`` with confluent-kafka and ``acks``; offset -> value of each acknowledged one."""
    acked: dict[int, bytes] = {}
    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": acks, "enable.idempotence": False,
                         "linger.ms": 5})

    def delivered(err: Any, msg: Any) -> None:
        if err:
            errors.append(err)
        else:
            acked[msg.offset()] = msg.value()

    for value in values:
        producer.produce(topic, value=value, partition=0, on_delivery=delivered)
    assert producer.flush(30) == 0 and errors == [], errors
    return acked


# The kafka-python race: kafka-python checks its positions against the leader epochs its metadata
# shows as poll() starts, while that metadata is refreshed on its network thread. A fetch sent after
# a refresh that came later goes out at the new epoch unchecked, the leader answers
# OFFSET_OUT_OF_RANGE, and the reset policy decides, as for aiokafka (Java checks each fetch it
# prepares). Either can happen to it, against Kafka as here.


def replica_log_end(cluster: MiniKafkaCluster, topic: str, broker: int) -> int:
    return int(next(r["log_end_offset"] for r in cluster.partition(topic)["replica_offsets"] if r["broker"] == broker))


def records(prefix: str, count: int) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(count)]


@pytest.mark.minikafka_cluster(config={"replica.lag.time.max.ms": 1000})
@pytest.mark.parametrize("stale_replica", ["alive", "started-last"])
def test_an_unclean_election_loses_exactly_the_records_above_the_new_leaders_log_end(
        minikafka_cluster: MiniKafkaCluster, stale_replica: str) -> None:
    """``alive``: the stale replica is elected as the last in-sync replica crashes (Kafka elects
    uncleanly in that same step). ``started-last``: every replica is down, then the stale one starts
    and is elected when it registers."""
    cluster = minikafka_cluster
    topic = cluster.new_topic(1, 3, {"min.insync.replicas": "2", "unclean.leader.election.enable": "true"})
    part = cluster.partition(topic)
    leader = part["leader"]
    stale, follower = [n for n in part["replicas"] if n != leader]
    acked = write(cluster, topic, records("everywhere", 5), "all")

    cluster.isolate(stale, "brokers")  # it fetches no more, and leaves the ISR after the lag time
    acked |= write(cluster, topic, records("in-sync-only", 5), "all")  # answered once the ISR is leader+follower
    assert sorted(cluster.isr(topic)) == sorted([leader, follower])
    stale_end = replica_log_end(cluster, topic, stale)
    assert stale_end == 5

    # a consumer of each client reads everything up to the high watermark: its position is 10.
    # aiokafka does not refresh its metadata when ListOffsets answers NOT_LEADER_OR_FOLLOWER, so after
    # a refresh failed while every broker was down it would ask the old leader until its metadata ages
    aiokafka_config = {"metadata_max_age_ms": 1000} if stale_replica == "started-last" else {}
    with ExitStack() as opened:  # every reader is closed, even when a start or another close fails
        def opened_reader(make: Callable[..., Any], *args: Any, **config: Any) -> Any:
            made = make(cluster.bootstrap, topic, *args, **config)
            opened.callback(made.close)
            return made

        readers = {"confluent-kafka": opened_reader(ConfluentReader, **{"auto.offset.reset": "earliest"}),
                   "kafka-python": opened_reader(KafkaPythonReader, auto_offset_reset="earliest"),
                   "aiokafka": opened_reader(AiokafkaReader, auto_offset_reset="earliest", **aiokafka_config)}
        strict = {"confluent-kafka": opened_reader(ConfluentReader, **{"auto.offset.reset": "error"}),
                  "kafka-python": opened_reader(KafkaPythonReader, auto_offset_reset="none"),
                  "aiokafka": opened_reader(AiokafkaReader, auto_offset_reset="none", **aiokafka_config)}
        for name, reader in [*readers.items(), *strict.items()]:
            assert reader.read(10) == sorted(acked.items()), name

        if stale_replica == "started-last":
            cluster.crash(stale)
        cluster.crash(follower)  # the ISR is the leader alone: acks=1 writes only reach it
        acked |= write(cluster, topic, records("leader-only", 5), "1")
        # the stale replica stays cut off until the leader is down: healed earlier, it could fetch the
        # records above 5 first (under load it did) and be elected with them
        cluster.crash(leader)
        cluster.heal(stale)
        if stale_replica == "started-last":
            assert cluster.leader(topic) == -1  # no replica left to elect
            cluster.start_broker(stale)
        assert (cluster.leader(topic), cluster.isr(topic)) == (stale, [stale])  # elected, not in sync
        assert replica_log_end(cluster, topic, stale) == stale_end
        cluster.start_broker(leader)
        cluster.start_broker(follower)
        cluster.wait_until_in_sync(topic)  # the old leader and follower cut their logs back to the stale one's

        after = write(cluster, topic, records("after", 2), "all")
        assert sorted(after) == [5, 6]  # offsets 5 and 6 again, with other records
        in_log = kafka_python_read_to_end(cluster.bootstrap, topic, 1)
        lost = set(acked.values()) - {r.value for r in in_log}
        assert lost == {value for offset, value in acked.items() if offset >= stale_end}
        kept = sorted((offset, value) for offset, value in acked.items() if offset < stale_end)
        assert [(r.offset, r.value) for r in in_log] == kept + sorted(after.items())

        # KIP-320: validated against the new leader's epochs, the position goes back to 5
        assert readers["confluent-kafka"].read(2) == sorted(after.items())
        kafka_python = readers["kafka-python"].read(2)
        if kafka_python != sorted(after.items()):  # it fetched before it validated (the kafka-python race, above)
            assert kafka_python + readers["kafka-python"].read(5) == kept + sorted(after.items())
        # aiokafka fetches from 10, beyond the log end: OFFSET_OUT_OF_RANGE, reset to the earliest offset
        assert readers["aiokafka"].read(7) == kept + sorted(after.items())
        for name, reader in readers.items():
            assert reader.errors == [], (name, reader.errors)
            assert reader.read(1, timeout=0.5) == [], name  # nothing more: no record twice

        assert_truncation_reported(strict)


def assert_truncation_reported(strict: dict[str, Any]) -> None:
    """Consumers with no reset policy, at offset 10 of a log that now ends at 7 and diverged at 5,
    report it: librdkafka and kafka-python the truncation and where the logs diverge (KIP-320),
    aiokafka the offset out of range."""
    assert [strict[name].read(1, timeout=20) for name in strict] == [[], [], []]
    [truncated] = strict["confluent-kafka"].errors
    assert truncated.code() == KafkaError._AUTO_OFFSET_RESET, truncated
    assert "log truncation detected at offset 10" in truncated.str() and "broker end offset is 5" in truncated.str()
    truncation = strict["kafka-python"].errors[0]
    if isinstance(truncation, LogTruncationError):
        assert [(tp.partition, at.offset) for tp, at in truncation.divergent_offsets.items()] == [(0, 5)]
    else:  # it fetched before it validated (the kafka-python race, above)
        assert isinstance(truncation, KafkaPythonOffsetOutOfRange), truncation
        assert [(tp.partition, at) for tp, at in truncation.args[0].items()] == [(0, 10)]
    out_of_range = strict["aiokafka"].errors[0]
    assert isinstance(out_of_range, OffsetOutOfRangeError), out_of_range
    assert [(tp.partition, at) for tp, at in out_of_range.args[0].items()] == [(0, 10)]

