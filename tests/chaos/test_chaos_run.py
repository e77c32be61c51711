"""A short seeded chaos run against one in-process broker, its nemesis restarting it, crashing it
right after it handled a transaction request, losing answers, answering errors after the append
and delaying answers (seed 360): real clients, zero anomalies in the history."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer

from bench.chaos.__main__ import main
from bench.chaos.history import History, Op, Rec, dump
from bench.chaos.nemesis import SINGLE_BROKER_ACTIONS, Fault, SingleBroker, schedule
from bench.chaos.run import report, run
from bench.chaos.workload import CLIENT_CONFIG, IdempotentWriter, Process, Transactions
from minikafka.testkit import MiniKafka

SEED = 360
SECONDS = 25.0
INTERVAL = 2.5


def test_schedule_is_the_seeds() -> None:
    first = schedule(SEED, SECONDS, SINGLE_BROKER_ACTIONS, INTERVAL)
    assert first == schedule(SEED, SECONDS, SINGLE_BROKER_ACTIONS, INTERVAL)
    assert first != schedule(SEED + 1, SECONDS, SINGLE_BROKER_ACTIONS, INTERVAL)
    assert {"restart-dirty", "crash", "crash-on-txn", "drop-txn", "error-after", "delay"} <= {f.action for f in first}
    assert all(a.at + a.duration < b.at for a, b in zip(first, first[1:], strict=False))


def test_short_run_under_faults_has_no_anomaly() -> None:
    with MiniKafka(config={"log.segment.bytes": 256 * 1024}) as kafka:
        result = run(kafka.bootstrap, SECONDS, SEED, SingleBroker(kafka), interval=INTERVAL)
    text = report(result)
    assert result.anomalies == [], text
    assert result.drained and not result.process_errors, text
    counts = result.counts()
    for kind, outcome in [("send", "ok"), ("txn", "ok"), ("txn", "failed"), ("poll", "ok"), ("commit", "ok"),
                          ("assign", "ok")]:
        assert counts[kind, outcome] > 0, (kind, outcome, text)
    assert result.records()["read read_committed"] > 0 and result.records()["read read_uncommitted"] > 0
    assert [fault for fault, _ in result.applied] == result.faults, text
    assert counts["fault", "ok"] == len(result.faults)
    rules = [info for fault, info in result.applied if fault.action in ("drop-txn", "error-after", "crash-on-txn")]
    assert len(rules) == 3 and all(info.startswith("fired on ") and not info.startswith("fired on 0 ")
                                   for info in rules), text
    assert f"seed {SEED}" in text and "anomalies: 0" in text


class RetryingWriter(IdempotentWriter):
    """A producer that retries without idempotence: a lost answer makes it write the batch again."""

    def _producer(self) -> Producer:
        return Producer({**CLIENT_CONFIG, "bootstrap.servers": self.bootstrap, "enable.idempotence": False,
                         "acks": "all", "linger.ms": 2, "message.timeout.ms": 20000})


def retrying_workload(bootstrap: str, topic: str, partitions: int, history: History, seed: int,
                      run_id: str) -> tuple[list[Process], list[Process]]:
    return [RetryingWriter("p0", bootstrap, topic, partitions, history, seed, pace=0.05, run_id=run_id)], []


def test_the_run_finds_what_a_producer_without_idempotence_writes_twice() -> None:
    """The whole chain can fail: real retries of a non-idempotent producer, whose answers the
    broker loses, are found as duplicates in the history."""
    lost_answers = [Fault(1.0, "drop-produce", 3.0, {"n": 3})]
    with MiniKafka() as kafka:
        result = run(kafka.bootstrap, 5.0, SEED, SingleBroker(kafka), faults=lost_answers,
                     workload=retrying_workload)
    assert result.applied == [(lost_answers[0], "fired on 3 request(s)")]
    duplicates = [a for a in result.anomalies if a.kind == "duplicate"]
    assert duplicates, report(result)
    by_index = {op.index: op for op in result.ops}
    assert all(by_index[i].process in ("p0", "drain-rc", "drain-ru") for a in duplicates for i in a.ops)


class Idle(Process):
    def run(self) -> None: ...


def test_a_fenced_transactional_writer_carries_on_with_a_new_producer() -> None:
    """A fenced producer raises its fatal error from every ``poll``; the writer records the
    transaction as unknown and the next one runs on a new producer (fencing the old)."""
    with MiniKafka() as kafka:
        topic = kafka.new_topic(partitions=1)
        txns = Transactions(Idle("t9", kafka.bootstrap, topic, 1, History(), SEED, 0.0), "fenced")
        intruder = Producer({**CLIENT_CONFIG, "bootstrap.servers": kafka.bootstrap, "transactional.id": "fenced"})
        intruder.init_transactions(10)
        outcome, _, info = txns.run([Rec(topic, 0, "t9-1")], abort=False)
        assert outcome in ("unknown", "failed") and "fenced" in info
        outcome, written, info = txns.run([Rec(topic, 0, "t9-2")], abort=False)
        assert (outcome, info) == ("ok", "") and written[0].offset is not None
        records = kafka.records(topic)
        assert len(records) == 2 and records[0].value == b"t9-2"  # t9-1 never written; t9-2 and its marker


@pytest.mark.parametrize("brokers", ["0", "17"])
def test_a_broker_count_out_of_range_is_refused_in_one_line(capsys: pytest.CaptureFixture[str], brokers: str) -> None:
    assert main(["--brokers", brokers]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--brokers" in err


def test_a_kept_history_is_checked_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "history.jsonl"
    dump([Op(0, "w0", "send", "ok", 0.0, 1.0, writes=(Rec("t", 0, "w0-1", 0),))], path)
    assert main(["--check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "lost-write: w0-1" in out and "#0 w0 send ok" in out
    path.write_text("not json\n")
    assert main(["--check", str(path)]) == 2
