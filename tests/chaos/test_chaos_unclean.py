"""The checker with unclean leader elections in the history: a loss an election explains (a record
at or above the new leader's log end, written while the old leader held it) is set apart and
attributed to that election; any other loss is still an anomaly."""

from __future__ import annotations

import pytest

from bench.chaos.__main__ import main
from bench.chaos.checker import examine
from tests.chaos.test_chaos_checker import Story, clean, rec


def elect(story: Story, partition: int, new_leader_end: int) -> int:
    """The nemesis's record of an unclean election of ``t/partition``, now in the story's time."""
    return story.add("nemesis", "election", offsets={f"t/{partition}": new_leader_end},
                     info=f"unclean election of t/{partition}: broker 3 (log end {new_leader_end}) elected")


def test_a_lost_write_above_the_new_leaders_log_end_is_explained_by_the_election() -> None:
    story, _ = clean()
    lost = story.add("w0", "send", writes=(rec("h", 0, 3), ))  # only the old leader had 0:3
    election = elect(story, 0, 3)
    findings = examine(story.ops)
    assert findings.anomalies == []
    [(anomaly, by)] = findings.explained
    assert (anomaly.kind, anomaly.ops, by) == ("lost-write", (lost,), election)
    assert "h acknowledged" in anomaly.message


def test_a_lost_write_below_the_new_leaders_log_end_is_an_anomaly() -> None:
    story, _ = clean()
    lost = story.add("w0", "send", writes=(rec("h", 0, 3),))  # the new leader had 0:3: it must survive
    elect(story, 0, 4)
    findings = examine(story.ops)
    assert findings.explained == []
    [anomaly] = findings.anomalies
    assert (anomaly.kind, anomaly.ops) == ("lost-write", (lost,))


def test_an_election_explains_nothing_on_another_partition_or_written_after_it() -> None:
    story, _ = clean()
    elect(story, 1, 0)
    elect(story, 0, 3)
    later = story.add("w0", "send", writes=(rec("h", 0, 3),))  # acknowledged by the new leader, then lost
    other = story.add("w0", "send", writes=(rec("i", 2, 0),))
    findings = examine(story.ops)
    assert findings.explained == []
    assert sorted(a.ops for a in findings.anomalies) == [(later,), (other,)]


def test_an_offset_taken_over_by_the_new_leader_is_explained() -> None:
    """The old leader's record read at 0:3, the new leader's record at the same offset after it:
    the acknowledged writes read as lost or as overwritten, the offset as read twice: all explained."""
    story, _ = clean()
    lost = story.add("w0", "send", writes=(rec("h", 0, 3),))
    old_read = story.poll("u0", [rec("h", 0, 3)], isolation="read_uncommitted", group="u", session=3)
    election = elect(story, 0, 3)
    taker = story.add("w1", "send", writes=(rec("i", 0, 3),))
    new_read = story.poll("r0", [rec("i", 0, 3)], session=2)
    findings = examine(story.ops)
    assert findings.anomalies == []
    assert sorted((a.kind, a.ops, by) for a, by in findings.explained) == [
        ("inconsistent-offset", (old_read, new_read), election),
        ("lost-write", (lost,), election),
        ("lost-write", (taker, old_read), election)]


def test_a_consumer_stepping_back_from_a_lost_record_is_explained() -> None:
    story, _ = clean()
    story.add("w0", "send", writes=(rec("h", 0, 3),))
    old_read = story.poll("u0", [rec("h", 0, 3)], isolation="read_uncommitted", group="u", session=1)
    election = elect(story, 0, 3)
    story.add("w0", "send", writes=(rec("i", 0, 3),))
    story.poll("u0", [rec("i", 0, 3)], isolation="read_uncommitted", group="u", session=1)
    story.poll("r0", [rec("i", 0, 3)], session=2)
    findings = examine(story.ops)
    assert findings.anomalies == []
    kinds = {(a.kind, by) for a, by in findings.explained}
    assert ("nonmonotonic-poll", election) in kinds and ("inconsistent-offset", election) in kinds
    assert all(old_read in a.ops for a, _ in findings.explained if a.kind == "nonmonotonic-poll")


def test_a_committed_offset_past_the_new_leaders_log_end_may_go_back() -> None:
    story, ids = clean()  # r0 committed t/0 at 3: it consumed 0:2, which only the old leader had
    elect(story, 0, 2)
    story.add("r0", "commit", offsets={"t/0": 2}, group="g")
    findings = examine(story.ops)
    back = len(story.ops) - 1
    assert findings.anomalies == []
    assert [(a.kind, a.ops) for a, _ in findings.explained] == [("offset-regression", (ids["commit"], back))]


def test_a_committed_offset_going_back_below_the_new_leaders_log_end_is_an_anomaly() -> None:
    story, ids = clean()  # r0 committed t/0 at 3: the new leader had 0:2, its position stands
    elect(story, 0, 3)
    back = story.add("r0", "commit", offsets={"t/0": 2}, group="g")
    findings = examine(story.ops)
    assert findings.explained == []
    assert [(a.kind, a.ops) for a in findings.anomalies] == [("offset-regression", (ids["commit"], back))]


def test_an_aborted_read_is_explained_when_only_the_abort_marker_can_have_been_lost() -> None:
    """e (1:1) of an aborted transaction read committed after an election whose new leader's log
    ended at 2: the abort marker, after e, may have been only on the old leader."""
    story, ids = clean()
    election = elect(story, 1, 2)
    story.poll("r1", [rec("e", 1, 1)], session=2)
    findings = examine(story.ops)
    # and r0, which had read 1:0 then 1:3 while e was aborted, seems to have skipped e
    assert sorted((a.kind, by) for a, by in findings.explained) == [("aborted-read", election),
                                                                    ("skipped-offset", election)]
    assert findings.anomalies == []


def test_an_aborted_read_is_an_anomaly_when_a_later_write_proves_the_marker_kept() -> None:
    """f (1:3) was written after e's abort was answered, so the marker lies below 3, below the new
    leader's log end (4): it was kept, and reading e committed is an anomaly."""
    story, ids = clean()
    elect(story, 1, 4)
    story.poll("r1", [rec("e", 1, 1)], session=2)
    findings = examine(story.ops)
    assert [(a.kind, a.ops[0]) for a in findings.anomalies] == [("aborted-read", ids["txn-e"])]
    # r0's pass over e, later than f's write, proves nothing of the marker: that one is explained
    assert [a.kind for a, _ in findings.explained] == ["skipped-offset"]


def test_a_skipped_record_of_a_plain_producer_is_not_explained_by_a_lost_marker() -> None:
    """Only a transaction's record may be passed over while aborted: a skipped record of an
    idempotent producer below the new leader's log end stays an anomaly."""
    story, _ = clean()
    skipping = story.poll("r1", [rec("a", 0, 0), rec("c", 0, 2)], session=1)  # b (0:1) was w0's send
    elect(story, 0, 3)
    findings = examine(story.ops)
    assert findings.explained == []
    assert [(a.kind, a.ops) for a in findings.anomalies] == [("skipped-offset", (skipping,))]


def test_a_poll_after_the_election_handing_over_records_fetched_before_is_dated_by_them() -> None:
    """r1's poll, begun after the election, hands over h and j (0:3, 0:6) that it fetched from the
    old leader; the new leader's records at 0:4 and 0:5 make it look like a skip, explained."""
    story, _ = clean()
    story.add("w0", "send", writes=(rec("h", 0, 3),))
    story.add("w0", "send", writes=(rec("j", 0, 6),))
    election = elect(story, 0, 3)
    for value, offset in [("k", 3), ("l", 4), ("m", 5)]:
        story.add("w1", "send", writes=(rec(value, 0, offset),))
    story.poll("r0", [rec("k", 0, 3), rec("l", 0, 4), rec("m", 0, 5)], session=2)
    story.poll("r1", [rec("h", 0, 3), rec("j", 0, 6)], session=2)
    findings = examine(story.ops)
    assert findings.anomalies == []
    assert ("skipped-offset", election) in [(a.kind, by) for a, by in findings.explained]


def test_a_committed_record_passed_over_after_its_commit_marker_was_lost_is_explained() -> None:
    """c (0:2) was read committed; the new leader (log end 3) had c but not the commit marker after
    it, and the producer's next abort decided c's transaction the other way: a consumer reading the
    partition afterwards passes over c."""
    story, _ = clean()
    election = elect(story, 0, 3)
    story.add("w0", "send", writes=(rec("z", 0, 4),))
    story.poll("d0", [rec("b", 0, 1), rec("z", 0, 4)], session=1)
    findings = examine(story.ops)
    assert findings.anomalies == []
    assert [(a.kind, by) for a, by in findings.explained] == [("skipped-offset", election)]


def test_unclean_elections_need_a_cluster_or_a_bootstrap(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--unclean"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--unclean" in err


@pytest.mark.parametrize("marker", [False, True])
def test_an_offset_read_before_the_election_and_committed_after_it_may_go_back(marker: bool) -> None:
    """u0 read h (0:3) from the old leader, the election dropped it, then u0 committed past it all
    the same, and later 3: the commit is dated by the group's last read below it, made before the
    election, even when the offset before the commit (h's transaction marker at 0:4) was never read."""
    story, _ = clean()
    if marker:
        story.add("t2", "txn", writes=(rec("h", 0, 3),), txn_id="t2")
    else:
        story.add("w0", "send", writes=(rec("h", 0, 3),))
    story.poll("u0", [rec("h", 0, 3)], isolation="read_uncommitted", group="u", session=2)
    election = elect(story, 0, 3)
    ahead = story.add("u0", "commit", offsets={"t/0": 5 if marker else 4}, group="u")
    back = story.add("u0", "commit", offsets={"t/0": 3}, group="u")
    findings = examine(story.ops)
    assert ("offset-regression", (ahead, back), election) in [(a.kind, a.ops, by) for a, by in findings.explained]
    assert findings.anomalies == []


@pytest.mark.parametrize("case", ["resumed at the log end", "resumed past a kept record", "read only after"])
def test_a_consumer_that_resumes_at_the_new_leaders_log_end_after_fetching_ahead(case: str) -> None:
    """x1 handed over a (0:0) and had fetched ahead into records only the old leader had; the new
    leader kept b and c (0:1, 0:2), and librdkafka, told that the epoch it fetched in ended at the
    new leader's log end, resumed there and passed over b and c (r0 read them): explained. Resuming
    past a record the new leader kept (log end 2: c was its own), or having read nothing before the
    election (no fetch from the old leader to cut back), it stays an anomaly."""
    story, _ = clean()
    if case != "read only after":
        story.poll("x1", [rec("a", 0, 0)], session=1)
    election = elect(story, 0, 2 if case == "resumed past a kept record" else 3)
    if case == "read only after":
        story.poll("x1", [rec("a", 0, 0)], session=1)
    story.add("w0", "send", writes=(rec("h", 0, 3),))
    resumed = story.poll("x1", [rec("h", 0, 3)], session=1)
    findings = examine(story.ops)
    if case == "resumed at the log end":
        assert findings.anomalies == []
        assert [(a.kind, a.positions, by) for a, by in findings.explained] == [
            ("skipped-offset", ((("t", 0), 1), (("t", 0), 2)), election)]
    else:
        assert findings.explained == []
        assert [(a.kind, a.ops[-1]) for a in findings.anomalies] == [("skipped-offset", resumed)]
