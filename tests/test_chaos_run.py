"""A short seeded chaos run against one in-process broker, its nemesis restarting it, crashing it
right after it handled a transaction request, losing answers, answering errors after the append
and delaying answers: real clients, zero anomalies in the history."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.chaos.__main__ import main
from bench.chaos.history import Op, Rec, dump
from bench.chaos.nemesis import SINGLE_BROKER_ACTIONS, SingleBroker, schedule
from bench.chaos.run import report, run
from minikafka.testkit import MiniKafka

SEED = 70
SECONDS = 25.0
INTERVAL = 2.5


def test_schedule_is_the_seeds() -> None:
    first = schedule(SEED, SECONDS, SINGLE_BROKER_ACTIONS, INTERVAL)
    assert first == schedule(SEED, SECONDS, SINGLE_BROKER_ACTIONS, INTERVAL)
    assert first != schedule(SEED + 1, SECONDS, SINGLE_BROKER_ACTIONS, INTERVAL)
    assert {"restart-dirty", "crash-on-txn", "drop-txn", "error-after", "delay"} <= {f.action for f in first}
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


def test_more_brokers_are_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--brokers", "3"]) == 2
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
