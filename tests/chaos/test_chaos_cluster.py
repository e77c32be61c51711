"""A short seeded chaos run on a three-broker cluster: a light workload (five confluent-kafka
clients) while the cluster nemesis crashes and shuts down brokers (controlled), moves leaders,
cuts brokers off from the others, from the clients, from the controller (fenced once its 0.4 s
session expires, a zombie leader until healed) or from all three, slows a follower, loses, delays
or refuses answers on one broker and crashes one after it handled a request (seed 9242: every kind
of fault); zero anomalies in the history."""

from __future__ import annotations

from typing import Any

from bench.chaos.history import History
from bench.chaos.nemesis import ClusterTarget, schedule
from bench.chaos.readers import GroupReader
from bench.chaos.run import report, run
from bench.chaos.workload import IdempotentWriter, Process, TransformWriter, TxnWriter
from minikafka.testkit import MiniKafkaCluster

SEED = 9242
SECONDS = 55.0
INTERVAL = 2.5
CONFIG = {"log.segment.bytes": 256 * 1024, "replica.lag.time.max.ms": 2000, "broker.session.timeout.ms": 400}


def light(bootstrap: str, topic: str, partitions: int, history: History, seed: int,
          run_id: str) -> tuple[list[Process], list[Process]]:
    """Fewer clients than the default workload (two cores are shared): one of each writer, one
    read_committed and one read_uncommitted reader."""
    common: dict[str, Any] = dict(bootstrap=bootstrap, topic=topic, partitions=partitions, history=history,
                                  seed=seed, run_id=run_id)
    writers: list[Process] = [IdempotentWriter("w0", pace=0.05, **common), TxnWriter("t0", pace=0.1, **common),
                              TransformWriter("x0", pace=0.0, group=f"chaos-transform-{run_id}", **common)]
    readers: list[Process] = [
        GroupReader("r0", pace=0.1, group=f"chaos-rc-{run_id}", isolation="read_committed", **common),
        GroupReader("u0", pace=0.1, group=f"chaos-ru-{run_id}", isolation="read_uncommitted", **common)]
    return writers, readers


def test_the_seeds_schedule_holds_every_cluster_fault() -> None:
    actions = ClusterTarget(None).actions
    faults = schedule(SEED, SECONDS, actions, INTERVAL)
    assert {fault.action for fault in faults} == set(actions)
    assert "unclean-election" not in actions and "unclean-election" in ClusterTarget(None, unclean=True).actions


def test_short_cluster_run_under_faults_has_no_anomaly() -> None:
    with MiniKafkaCluster(brokers=3, config=CONFIG) as cluster:
        result = run(cluster.bootstrap, SECONDS, SEED, ClusterTarget(cluster), replication=3,
                     interval=INTERVAL, workload=light)
    text = report(result)
    assert result.anomalies == [], text
    assert result.drained, text
    counts = result.counts()
    for kind, outcome in [("send", "ok"), ("txn", "ok"), ("poll", "ok"), ("commit", "ok")]:
        assert counts[kind, outcome] > 0, (kind, outcome, text)
    assert [fault for fault, _ in result.applied] == result.faults, text
    assert counts["fault", "ok"] == len(result.faults), text
    assert not result.explained and not [op for op in result.ops if op.kind == "election"], text
    assert f"seed {SEED}" in text and "anomalies: 0" in text


