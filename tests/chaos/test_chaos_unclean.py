"""The checker with unclean leader elections in the history: a loss an election explains (a record
at or above the new leader's log end, written while the old leader held it) is set apart and
attributed to that election; any other loss is still an anomaly."""

from __future__ import annotations

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
