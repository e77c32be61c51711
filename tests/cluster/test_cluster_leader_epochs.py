"""Each replica's ``leader-epoch-checkpoint`` file, byte for byte in Kafka's format (a version line
``0``, the number of entries, then ``<epoch> <start offset>`` lines), as leadership moves around a
3-broker cluster, and a broker restarted from it answering OffsetForLeaderEpoch with the epochs it
kept. Kafka: ``LeaderEpochFileCache`` and ``LeaderEpochCheckpointFile``,
https://github.com/apache/kafka/blob/trunk/storage/src/main/java/org/apache/kafka/storage/internals/epoch/LeaderEpochFileCache.java."""

from __future__ import annotations

from pathlib import Path

from minikafka.testkit import MiniKafkaCluster
from tests.cluster.cluster_wire import epoch_end, produce
from tests.cluster.test_cluster_failover import wait_for

TOPIC = "epochs"


def checkpoint(kafka: MiniKafkaCluster, node: int) -> bytes:
    return (kafka.data_dir / f"node-{node}" / f"{TOPIC}-0" / "leader-epoch-checkpoint").read_bytes()


def files_become(kafka: MiniKafkaCluster, expected: dict[int, bytes], what: str) -> None:
    wait_for(lambda: {n: checkpoint(kafka, n) for n in expected} == expected, what, timeout=20)


def write(kafka: MiniKafkaCluster, records: int = 1) -> None:
    for _ in range(records):
        part = produce(kafka, kafka.leader(TOPIC), TOPIC, 9).responses[0].partition_responses[0]
        assert part.error_code == 0, part


def test_the_checkpoint_files_follow_leader_changes_and_a_restarted_broker_keeps_its_epochs(tmp_path: Path) -> None:
    with MiniKafkaCluster(brokers=3, data_dir=tmp_path / "cluster",
                          config={"auto.leader.rebalance.enable": False}) as kafka:
        kafka.create_topic(TOPIC, partitions=1, replication_factor=3)
        state = kafka.partition(TOPIC)
        a = state["leader"]
        b, c = (n for n in state["replicas"] if n != a)
        # a new leader records where its epoch starts before anything is written
        assert checkpoint(kafka, a) == b"0\n1\n0 0\n"

        write(kafka, 2)
        kafka.wait_until_in_sync(TOPIC)
        files_become(kafka, dict.fromkeys((a, b, c), b"0\n1\n0 0\n"), "epoch 0 everywhere")

        kafka.move_leader(TOPIC, 0, b)  # epoch 1 starts at offset 2
        write(kafka)
        files_become(kafka, dict.fromkeys((a, b, c), b"0\n2\n0 0\n1 2\n"), "epoch 1 everywhere")

        kafka.wait_until_in_sync(TOPIC)
        kafka.move_leader(TOPIC, 0, c)  # epoch 2: nothing is written in it
        assert checkpoint(kafka, c) == b"0\n3\n0 0\n1 2\n2 3\n"
        kafka.wait_until_in_sync(TOPIC)
        kafka.move_leader(TOPIC, 0, a)  # epoch 3 starts at offset 3
        write(kafka)
        # c learns that epoch 2 ended where it began and drops it, as Kafka's follower truncation does
        files_become(kafka, dict.fromkeys((a, b, c), b"0\n3\n0 0\n1 2\n3 3\n"), "epochs 0, 1 and 3 everywhere")

        kafka.wait_until_in_sync(TOPIC)
        kafka.crash(c)
        kafka.start_broker(c)
        kafka.wait_until_in_sync(TOPIC)
        assert checkpoint(kafka, c) == b"0\n3\n0 0\n1 2\n3 3\n"
        kafka.move_leader(TOPIC, 0, c)  # epoch 4 starts at offset 4
        assert checkpoint(kafka, c) == b"0\n4\n0 0\n1 2\n3 3\n4 4\n"
        ends = {epoch: (answer.error_code, answer.leader_epoch, answer.end_offset)
                for epoch in range(6) for answer in [epoch_end(kafka, c, TOPIC, 4, epoch)]}
        assert ends == {0: (0, 0, 2), 1: (0, 1, 3), 2: (0, 1, 3), 3: (0, 3, 4), 4: (0, 4, 4), 5: (0, -1, -1)}
