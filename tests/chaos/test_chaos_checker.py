"""The chaos checker over made-up histories: it finds each anomaly, names the operations that
show it, and finds none in a clean history; histories survive a JSONL round trip."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.chaos.checker import ANOMALY_KINDS, Anomaly, check
from bench.chaos.history import FAILED, OK, UNKNOWN, History, Op, Rec, load

T = "t"


def rec(value: str, partition: int, offset: int | None) -> Rec:
    return Rec(T, partition, value, offset)


class Story:
    """A history written op by op, each one after the last in time unless told otherwise."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.clock = 0.0

    def add(self, process: str, kind: str, outcome: str = OK, *, start: float | None = None,
            end: float | None = None, **fields: object) -> int:
        self.clock += 1.0
        index = len(self.ops)
        begin = self.clock if start is None else start
        self.ops.append(Op(index=index, process=process, kind=kind, outcome=outcome, start=begin,
                           end=begin + 0.5 if end is None else end, **fields))  # type: ignore[arg-type]
        return index

    def poll(self, process: str, reads: list[Rec], isolation: str = "read_committed", session: int = 1,
             group: str | None = "g") -> int:
        return self.add(process, "poll", reads=tuple(reads), isolation=isolation, session=session, group=group)


def clean() -> tuple[Story, dict[str, int]]:
    """Two partitions: idempotent sends, a committed and an aborted transaction, a
    consume-transform-produce transaction, and read_committed and read_uncommitted readers."""
    s = Story()
    ids = {
        "send-a": s.add("w0", "send", writes=(rec("a", 0, 0),)),
        "send-b": s.add("w0", "send", writes=(rec("b", 0, 1),)),
        "txn-cd": s.add("t0", "txn", writes=(rec("c", 0, 2), rec("d", 1, 0)), txn_id="t0"),
        "txn-e": s.add("t0", "txn", FAILED, writes=(rec("e", 1, 1),), txn_id="t0"),
        "send-g": s.add("w1", "send", UNKNOWN, writes=(rec("g", 1, None),)),
        "assign": s.add("x0", "assign", group="xg", session=1, offsets={"t/0": -1}),
        "xpoll": s.poll("x0", [rec("a", 0, 0), rec("b", 0, 1)], group="xg"),
        "txn-f": s.add("x0", "txn", writes=(rec("f", 1, 3),), reads=(rec("a", 0, 0), rec("b", 0, 1)),
                       offsets={"t/0": 2}, group="xg", txn_id="x0"),
        "rc": s.poll("r0", [rec("a", 0, 0), rec("b", 0, 1), rec("c", 0, 2), rec("d", 1, 0), rec("f", 1, 3)]),
        "commit": s.add("r0", "commit", offsets={"t/0": 3, "t/1": 4}, group="g"),
        "ru": s.poll("u0", [rec("a", 0, 0), rec("d", 1, 0), rec("e", 1, 1), rec("f", 1, 3)],
                     isolation="read_uncommitted", group="u"),
        "ru2": s.poll("u0", [rec("b", 0, 1), rec("c", 0, 2)], isolation="read_uncommitted", group="u"),
    }
    return s, ids


def found(story: Story) -> list[Anomaly]:
    return check(story.ops)


def only(story: Story, kind: str) -> list[Anomaly]:
    anomalies = found(story)
    assert {a.kind for a in anomalies} == {kind}, anomalies
    return anomalies


def test_clean_history_has_no_anomaly() -> None:
    story, _ = clean()
    assert found(story) == []


def test_lost_write_acknowledged_never_read() -> None:
    story, _ = clean()
    lost = story.add("w0", "send", writes=(rec("h", 0, 3),))
    [anomaly] = only(story, "lost-write")
    assert anomaly.ops == (lost,) and "h" in anomaly.message


def test_lost_write_acknowledged_at_an_offset_holding_another_value() -> None:
    story, ids = clean()
    lost = story.add("w9", "send", writes=(rec("h", 0, 1),))  # b was read at 0:1
    reader = story.poll("r5", [rec("h", 0, 7)])
    [anomaly] = only(story, "lost-write")
    assert anomaly.ops == (lost, ids["xpoll"]) and "holding b" in anomaly.message
    assert reader not in anomaly.ops


def test_committed_transaction_read_only_read_uncommitted_is_lost() -> None:
    story, _ = clean()
    txn = story.add("t1", "txn", writes=(rec("j", 0, 3), rec("k", 1, 4)), txn_id="t1")
    story.poll("u0", [rec("j", 0, 3), rec("k", 1, 4)], isolation="read_uncommitted", group="u", session=2)
    anomalies = only(story, "lost-write")
    assert [a.ops for a in anomalies] == [(txn,), (txn,)]
    assert all("read only read_uncommitted" in a.message for a in anomalies)


def test_duplicate_value_at_two_offsets() -> None:
    story, ids = clean()
    again = story.poll("u0", [rec("a", 0, 9)], isolation="read_uncommitted", group="u", session=1)
    anomalies = found(story)
    dup = [a for a in anomalies if a.kind == "duplicate"]
    assert len(dup) == 1 and dup[0].ops == (ids["xpoll"], again) and "a read at 2 positions" in dup[0].message


def test_duplicate_consumed_by_two_committed_transactions() -> None:
    story, ids = clean()
    second = story.add("x1", "txn", writes=(rec("i", 0, 3),), reads=(rec("b", 0, 1),), group="xg", txn_id="x1",
                       offsets={"t/0": 2})
    story.poll("u0", [rec("i", 0, 3)], isolation="read_uncommitted", group="u", session=2)
    story.poll("r0", [rec("i", 0, 3)], session=2)
    [anomaly] = only(story, "duplicate")
    assert anomaly.ops == (ids["txn-f"], second) and "b consumed by 2" in anomaly.message


def test_inconsistent_offset() -> None:
    story, ids = clean()
    other = story.add("w2", "send", UNKNOWN, writes=(rec("z", 0, None),))
    reader = story.poll("u1", [rec("z", 0, 0)], isolation="read_uncommitted", group="u")
    [anomaly] = only(story, "inconsistent-offset")
    assert anomaly.ops == (ids["xpoll"], reader) and "t/0:0 read as a, z" in anomaly.message
    assert other not in anomaly.ops


def test_aborted_read() -> None:
    story, ids = clean()
    reader = story.poll("r1", [rec("e", 1, 1)], session=1)
    anomalies = found(story)
    [anomaly] = [a for a in anomalies if a.kind == "aborted-read"]
    assert anomaly.ops == (ids["txn-e"], reader)


def test_non_atomic_transaction() -> None:
    story, ids = clean()
    txn = story.add("t1", "txn", writes=(rec("j", 0, 3), rec("k", 1, 4)), txn_id="t1")
    reader = story.poll("r1", [rec("j", 0, 3)])
    story.poll("u0", [rec("j", 0, 3), rec("k", 1, 4)], isolation="read_uncommitted", group="u", session=2)
    [anomaly] = only(story, "non-atomic")
    assert anomaly.ops == (txn, reader) and "k not" in anomaly.message


def test_unknown_transaction_seen_in_part_is_non_atomic_too() -> None:
    story, _ = clean()
    txn = story.add("t1", "txn", UNKNOWN, writes=(rec("j", 0, 3), rec("k", 1, 4)), txn_id="t1")
    story.poll("r1", [rec("j", 0, 3)])
    [anomaly] = only(story, "non-atomic")
    assert anomaly.ops[0] == txn


def test_nonmonotonic_poll() -> None:
    story, _ = clean()
    first = story.poll("r1", [rec("a", 0, 0), rec("b", 0, 1)], session=4)
    second = story.poll("r1", [rec("a", 0, 0)], session=4)
    [anomaly] = only(story, "nonmonotonic-poll")
    assert anomaly.ops == (first, second) and "read offset 0 (a) after 1 (b)" in anomaly.message


def test_reading_again_in_a_new_session_is_no_anomaly() -> None:
    story, _ = clean()
    story.poll("r1", [rec("a", 0, 0), rec("b", 0, 1)], session=4)
    story.poll("r1", [rec("a", 0, 0)], session=5)
    assert found(story) == []


def test_skipped_offset() -> None:
    story, _ = clean()
    skipping = story.poll("r1", [rec("a", 0, 0), rec("c", 0, 2)], session=1)
    [anomaly] = only(story, "skipped-offset")
    assert anomaly.ops == (skipping,) and "skipping 1 (read by x0)" in anomaly.message


def test_read_committed_may_pass_over_an_aborted_record() -> None:
    story, _ = clean()
    story.poll("r1", [rec("d", 1, 0), rec("f", 1, 3)], session=1)  # e at 1:1 was aborted
    assert found(story) == []


def test_nonmonotonic_send() -> None:
    story, _ = clean()
    first = story.add("w3", "send", writes=(rec("m", 0, 5),))
    second = story.add("w3", "send", writes=(rec("n", 0, 4),))
    story.poll("r3", [rec("n", 0, 4), rec("m", 0, 5)])
    [anomaly] = only(story, "nonmonotonic-send")
    assert anomaly.ops == (first, second)


def test_committed_offset_going_backwards() -> None:
    story, ids = clean()
    back = story.add("r1", "commit", offsets={"t/0": 1}, group="g")
    [anomaly] = only(story, "offset-regression")
    assert anomaly.ops == (ids["commit"], back) and "at 1 after 3" in anomaly.message


def test_concurrent_commits_are_not_ordered() -> None:
    story, ids = clean()
    commit = story.ops[ids["commit"]]
    story.add("r1", "commit", offsets={"t/0": 1}, group="g", start=commit.end - 0.1)
    assert found(story) == []


def test_member_reading_below_the_committed_offset_after_assignment() -> None:
    story, ids = clean()
    assign = story.add("r1", "assign", group="g", session=1, offsets={"t/0": -1})
    reader = story.poll("r1", [rec("b", 0, 1), rec("c", 0, 2)], session=1)
    [anomaly] = only(story, "offset-regression")
    assert anomaly.ops == (ids["commit"], assign, reader) and "read from 1 below committed 3" in anomaly.message


def test_write_read_cycle_between_transactions() -> None:
    story, _ = clean()
    one = story.add("x1", "txn", writes=(rec("p", 0, 3),), reads=(rec("q", 1, 4),), txn_id="x1", start=100, end=110)
    two = story.add("x2", "txn", writes=(rec("q", 1, 4),), reads=(rec("p", 0, 3),), txn_id="x2", start=100, end=110)
    story.poll("r1", [rec("p", 0, 3)], session=3)
    story.poll("r2", [rec("q", 1, 4)], session=3)
    story.poll("u0", [rec("p", 0, 3)], isolation="read_uncommitted", group="u", session=2)
    story.poll("u1", [rec("q", 1, 4)], isolation="read_uncommitted", group="u", session=2)
    [anomaly] = only(story, "txn-cycle")
    assert anomaly.ops == (one, two)


def test_realtime_cycle_reading_a_later_transaction() -> None:
    story, _ = clean()
    early = story.add("x1", "txn", writes=(rec("p", 0, 3),), reads=(rec("q", 1, 4),), txn_id="x1",
                      start=100, end=101)
    late = story.add("t1", "txn", writes=(rec("q", 1, 4),), txn_id="t1", start=102, end=103)
    story.poll("r1", [rec("p", 0, 3), rec("q", 1, 4)], session=3)
    story.poll("u0", [rec("p", 0, 3), rec("q", 1, 4)], isolation="read_uncommitted", group="u", session=2)
    [anomaly] = only(story, "txn-cycle")
    assert anomaly.ops == (early, late)


def test_interleaved_transaction_writes_are_no_cycle() -> None:
    """Offsets order records, not transactions: opposite orders in two partitions are allowed."""
    story, _ = clean()
    story.add("t1", "txn", writes=(rec("p", 0, 3), rec("q", 1, 5)), txn_id="t1", start=100, end=110)
    story.add("t2", "txn", writes=(rec("r", 0, 4), rec("s", 1, 4)), txn_id="t2", start=100, end=110)
    story.poll("r1", [rec("p", 0, 3), rec("r", 0, 4)], session=3)
    story.poll("r2", [rec("s", 1, 4), rec("q", 1, 5)], session=3)
    story.poll("u0", [rec("p", 0, 3), rec("r", 0, 4), rec("s", 1, 4), rec("q", 1, 5)],
               isolation="read_uncommitted", group="u", session=2)
    assert found(story) == []


def test_every_kind_is_tested() -> None:
    names = " ".join(name for name in globals() if name.startswith("test_"))
    words = {"lost-write": "lost_write", "duplicate": "duplicate", "inconsistent-offset": "inconsistent",
             "aborted-read": "aborted_read", "non-atomic": "non_atomic", "nonmonotonic-poll": "nonmonotonic_poll",
             "skipped-offset": "skipped", "nonmonotonic-send": "nonmonotonic_send",
             "offset-regression": "committed_offset", "txn-cycle": "cycle"}
    assert set(words) == set(ANOMALY_KINDS)
    assert all(word in names for word in words.values())


@pytest.mark.parametrize("mutate", [False, True])
def test_history_round_trip(tmp_path: Path, mutate: bool) -> None:
    story, _ = clean()
    if mutate:
        story.add("w0", "send", writes=(rec("h", 0, 3),))
    history = History()
    for op in story.ops:
        history.add(op.process, op.kind, op.outcome, writes=op.writes, reads=op.reads, offsets=op.offsets,
                    txn_id=op.txn_id, isolation=op.isolation, group=op.group, session=op.session)
    path = tmp_path / "history.jsonl"
    history.dump(path)
    again = load(path)
    assert [(op.kind, op.writes, op.reads, op.offsets) for op in again] == \
        [(op.kind, op.writes, op.reads, op.offsets) for op in story.ops]
    assert [a.kind for a in check(again)] == (["lost-write"] if mutate else [])
