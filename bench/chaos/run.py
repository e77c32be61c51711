"""One chaos run: create the topic, run the workload (and the nemesis), drain, check, report."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from bench.chaos import checker
from bench.chaos.history import History, Op
from bench.chaos.nemesis import Fault, Nemesis, Target, schedule
from bench.chaos.readers import GroupReader, KafkaPythonReader, drain
from bench.chaos.workload import IdempotentWriter, KafkaPythonWriter, Process, TransformWriter, TxnWriter


@dataclass
class Result:
    """What a run did and found."""

    seed: int
    ops: list[Op]
    faults: list[Fault]
    applied: list[tuple[Fault, str]]
    anomalies: list[checker.Anomaly]
    drained: bool = True
    #: anomalies an unclean leader election explains, each with its election's operation index
    explained: list[tuple[checker.Anomaly, int]] = field(default_factory=list)
    process_errors: dict[str, list[str]] = field(default_factory=dict)

    def counts(self) -> Counter[tuple[str, str]]:
        return Counter((op.kind, op.outcome) for op in self.ops)

    def records(self) -> Counter[str]:
        """Records written (by outcome of their operation) and read (by isolation)."""
        out: Counter[str] = Counter()
        for op in self.ops:
            out[f"written {op.outcome}"] += len(op.writes)
            if op.kind == "poll":
                out[f"read {op.isolation}"] += len(op.reads)
        return out


def processes(bootstrap: str, topic: str, partitions: int, history: History, seed: int,
              run_id: str) -> tuple[list[Process], list[Process]]:
    """The workload's writers and group readers (light: a few clients, small values)."""
    common: dict[str, Any] = dict(bootstrap=bootstrap, topic=topic, partitions=partitions, history=history,
                                  seed=seed, run_id=run_id)
    writers: list[Process] = [
        IdempotentWriter("w0", pace=0.05, **common),
        KafkaPythonWriter("w1", pace=0.1, **common),
        TxnWriter("t0", pace=0.1, **common),
        TransformWriter("x0", pace=0.0, group=f"chaos-transform-{run_id}", **common),
    ]
    readers: list[Process] = [
        GroupReader("r0", pace=0.1, group=f"chaos-rc-{run_id}", isolation="read_committed", **common),
        KafkaPythonReader("r1", pace=0.1, group=f"chaos-rc-{run_id}", isolation="read_committed", **common),
        GroupReader("u0", pace=0.1, group=f"chaos-ru-{run_id}", isolation="read_uncommitted", **common),
    ]
    return writers, readers


def create_topic(bootstrap: str, topic: str, partitions: int, replication: int, unclean: bool = False) -> None:
    """The run's topic; with ``unclean``, ``unclean.leader.election.enable=true`` on it alone (the
    internal topics keep the broker's setting)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    config = {"unclean.leader.election.enable": "true"} if unclean else {}
    for future in admin.create_topics([NewTopic(topic, partitions, replication, config=config)],
                                      request_timeout=15).values():
        future.result(30)


Workload = Callable[[str, str, int, History, int, str], tuple[list[Process], list[Process]]]


def run(bootstrap: str, seconds: float, seed: int, target: Target | None = None, partitions: int = 3,
        replication: int = 1, interval: float = 4.0, log: Callable[[str], Any] = lambda _: None,
        faults: list[Fault] | None = None, workload: Workload = processes, unclean: bool = False) -> Result:
    """Run the workload against ``bootstrap`` for ``seconds``, with the nemesis on ``target``
    (none when None) following the seed's schedule (or ``faults``), then drain and check;
    ``unclean``: the topic allows unclean leader elections."""
    run_id = f"{seed}-{uuid.uuid4().hex[:6]}"
    topic = f"chaos-{run_id}"
    history = History()
    create_topic(bootstrap, topic, partitions, replication, unclean)
    if faults is None:
        faults = schedule(seed, seconds, target.actions, interval) if target is not None else []
    writers, readers = workload(bootstrap, topic, partitions, history, seed, run_id)
    for process in readers + writers:
        process.start()
    nemesis = Nemesis(target, faults, history) if target is not None else None
    if nemesis is not None:
        nemesis.start()
    log(f"running {seconds:g} s on {topic} ({len(faults)} faults scheduled)")
    time.sleep(seconds)
    if nemesis is not None:
        nemesis.stop()
    for group in (writers, readers):
        for process in group:
            process.stop()
        for process in group:
            process.join()
    log("draining")
    drained = all([drain(bootstrap, topic, partitions, history, "read_committed"),
                   drain(bootstrap, topic, partitions, history, "read_uncommitted")])
    ops = history.ops
    findings = checker.examine(ops)
    return Result(seed, ops, faults, nemesis.applied if nemesis else [], findings.anomalies, drained=drained,
                  process_errors={p.name: p.errors for p in writers + readers if p.errors},
                  explained=findings.explained)


def report(result: Result, show_ops: int = 6) -> str:
    """The run's report: seed, schedule, counts, faults injected and every anomaly with its operations."""
    lines = [f"seed {result.seed}", f"schedule ({len(result.faults)} faults):"]
    lines += [f"  {fault.describe()}" for fault in result.faults]
    lines.append("operations:")
    for (kind, outcome), count in sorted(result.counts().items()):
        lines.append(f"  {kind:7} {outcome:8} {count}")
    lines.append("records: " + ", ".join(f"{k} {v}" for k, v in sorted(result.records().items())))
    by_action = Counter(fault.action for fault, _ in result.applied)
    lines.append(f"faults injected ({len(result.applied)}): "
                 + ", ".join(f"{action} {count}" for action, count in sorted(by_action.items())))
    lines += [f"  {fault.describe()}: {info}" for fault, info in result.applied]
    if not result.drained:
        lines.append("WARNING: the drain did not reach the end of every partition; lost writes may be unread")
    for name, errors in sorted(result.process_errors.items()):
        lines.append(f"process {name} stopped early or struggled: {'; '.join(errors[:3])}")
    by_index = {op.index: op for op in result.ops}
    lines += describe_explained(result.explained, by_index, show_ops)
    lines.append(f"anomalies: {len(result.anomalies)}")
    lines += describe_anomalies(result.anomalies, by_index, show_ops)
    return "\n".join(lines)


def describe_explained(explained: list[tuple[checker.Anomaly, int]], by_index: dict[int, Op],
                       show: int) -> list[str]:
    """What the unclean elections explain: per election, the counts by kind and (up to ``show``)
    the anomalies with what they lost."""
    if not explained:
        return []
    by_election: dict[int, list[checker.Anomaly]] = {}
    for anomaly, election in explained:
        by_election.setdefault(election, []).append(anomaly)
    # a lost write shown by its write alone was never read; one shown with a read was overwritten
    lost = sum(1 for anomaly, _ in explained if anomaly.kind == "lost-write" and len(anomaly.ops) == 1)
    lines = [f"explained by {len(by_election)} unclean leader election(s): {len(explained)} anomalies,"
             f" {lost} of them acknowledged writes never read"]
    for election, anomalies in sorted(by_election.items()):
        kinds = Counter(anomaly.kind for anomaly in anomalies)
        lines.append(f"  #{election} {by_index[election].info}: "
                     + ", ".join(f"{kind} {count}" for kind, count in sorted(kinds.items())))
        lines += [f"      {anomaly.kind}: {anomaly.message}" for anomaly in anomalies[:show]]
        if len(anomalies) > show:
            lines.append(f"      ... {len(anomalies) - show} more")
    return lines


def describe_anomalies(anomalies: list[checker.Anomaly], by_index: dict[int, Op], show_ops: int) -> list[str]:
    """Each anomaly and (up to ``show_ops`` of) the operations that show it."""
    lines = []
    for anomaly in anomalies:
        lines.append(f"  {anomaly.kind}: {anomaly.message}")
        for index in anomaly.ops[:show_ops]:
            lines.append(f"      {by_index[index].describe()}")
        if len(anomaly.ops) > show_ops:
            lines.append(f"      ... {len(anomaly.ops) - show_ops} more operations")
    return lines
