"""The cluster nemesis's ``unclean-election`` on three real brokers, and the watcher that records
it: the lagging replica is elected, and the log end offset recorded for it is where the records
only the old leader had begin (none of those survives; everything below it does); and, over epoch
checkpoint files, where a stale new leader's log parts from the old leader's below its log end."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from bench.chaos.cluster_watch import ElectionWatcher
from bench.chaos.nemesis import ClusterTarget, Fault
from bench.chaos.workload import CLIENT_CONFIG
from minikafka.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT, EpochEntry, format_leader_epoch_checkpoint
from minikafka.testkit import MiniKafkaCluster

TOPIC = "chaos-watched"


def test_an_unclean_election_is_made_and_recorded_with_the_new_leaders_log_end() -> None:
    with MiniKafkaCluster(brokers=3, config={"replica.lag.time.max.ms": 1000}) as cluster:
        cluster.create_topic(TOPIC, 1, 3, config={"unclean.leader.election.enable": "true"})
        target = ClusterTarget(cluster, unclean=True, out_of_sync_within=15.0)
        before = cluster.partition(TOPIC, 0)
        acked: dict[str, tuple[int, float]] = {}
        stop = threading.Event()

        def produce() -> None:
            producer = Producer({**CLIENT_CONFIG, "bootstrap.servers": cluster.bootstrap, "acks": "all",
                                 "linger.ms": 1, "message.timeout.ms": 5000})

            def report(err: object, msg: object) -> None:
                if err is None:
                    acked[msg.value().decode()] = (msg.offset(), time.monotonic())  # type: ignore[attr-defined]

            n = 0
            while not stop.is_set():
                n += 1
                producer.produce(TOPIC, value=f"v{n}".encode(), partition=0, on_delivery=report)
                producer.poll(0.02)
            producer.flush(10)

        writer = threading.Thread(target=produce)
        writer.start()
        try:
            fault = Fault(0.0, "unclean-election", 0.5, {"pick": 0})
            crashed = target.apply(fault)
            assert isinstance(crashed, list) and len(crashed) == 2, crashed
            deadline = time.monotonic() + 10
            elections = target.elections()
            while not elections and time.monotonic() < deadline:
                time.sleep(0.05)
                elections += target.elections()
            target.undo(fault, crashed)
        finally:
            stop.set()
            writer.join(30)
        [election] = elections
        lagging = next(n for n in before["replicas"] if n not in crashed)
        assert (election.topic, election.partition, election.new_leader, election.exact) == (TOPIC, 0, lagging, True)
        assert election.old_leader in crashed and election.old_leader_end is not None
        assert election.new_leader_end < election.old_leader_end
        lost_before = [v for v, (offset, at) in acked.items() if offset >= election.new_leader_end and at < election.before]
        assert lost_before, "the old leader acknowledged writes the lagging replica lacked"

        cluster.wait_until_in_sync(TOPIC, 0, timeout=30)
        consumer = Consumer({**CLIENT_CONFIG, "bootstrap.servers": cluster.bootstrap, "group.id": "watch",
                             "enable.partition.eof": True, "auto.offset.reset": "earliest"})
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        final: dict[int, str] = {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                break  # the end of the partition
            final[message.offset()] = message.value().decode()
        consumer.close()
        kept = {v for v, (offset, _) in acked.items() if offset < election.new_leader_end}
        assert kept <= set(final.values())  # everything the new leader had survives
        assert not set(lost_before) & set(final.values())  # nothing only the old leader had


@pytest.mark.parametrize("stale", [True, False])
def test_the_election_records_where_the_new_leaders_log_parts_from_the_old_one(tmp_path: Path, stale: bool) -> None:
    """Stale: broker 1, started again with epoch 2's records up to 1676, is elected (epoch 4) in
    place of broker 3, which has led epoch 3 from 1408: from 1408 on the records were only broker
    3's, though broker 1's log ends at 1676. Not stale: broker 1 has epoch 2 up to 1500, where it
    is elected; broker 3's epoch 2 went on to 1800: the logs agree up to 1500."""
    old_entries = [(0, 0), (2, 1000), (3, 1408)] if stale else [(0, 0), (2, 1000)]
    new_entries = [(0, 0), (2, 1000), (4, 1676 if stale else 1500)]
    for node, entries in [(3, old_entries), (1, new_entries)]:
        directory = tmp_path / f"node-{node}" / "chaos-t-0"
        directory.mkdir(parents=True)
        (directory / LEADER_EPOCH_CHECKPOINT).write_text(
            format_leader_epoch_checkpoint([EpochEntry(epoch, start) for epoch, start in entries]))
    watcher = ElectionWatcher(SimpleNamespace(data_dir=tmp_path))
    offsets = [{"broker": 3, "log_end_offset": 1800}, {"broker": 1, "log_end_offset": 1676 if stale else 1500}]
    watcher._compare(("chaos-t", 0), 1.0, {"leader": 3, "leader_epoch": 3 if stale else 2, "isr": [3],
                                            "replica_offsets": offsets})
    watcher._compare(("chaos-t", 0), 2.0, {"leader": 1, "leader_epoch": 4, "isr": [1], "replica_offsets": offsets})
    [election] = watcher.found()
    assert (election.old_leader, election.new_leader, election.exact) == (3, 1, True)
    if stale:
        assert (election.new_leader_end, election.new_leader_log_end) == (1408, 1676)
        assert "parting from the old leader's at 1408" in election.describe()
    else:
        assert (election.new_leader_end, election.new_leader_log_end) == (1500, None)
