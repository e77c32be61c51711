"""Watching a cluster under the nemesis for unclean leader elections.

Any fault can cause one once the topic allows it (a crash of the last in-sync replica, a broker
started while its partitions have no leader), not only the nemesis's ``unclean-election``, so a
thread reads the run's partitions from the cluster's controls every ``interval`` seconds: a new
leader epoch whose leader was not in the ISR seen just before is an unclean election. Where the
new leader's log ended when it was elected is read from its ``leader-epoch-checkpoint``: a new
leader records there the epoch it starts and its log end offset at that moment, exactly. The
election happened between the two reads, ``before`` and ``at``; an ISR that changed and an
election made between two reads are missed, which leaves the losses unexplained (reported as
anomalies), never the other way round.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from minikafka.storage.leader_epoch import LeaderEpochCache, LeaderEpochFileError

#: consecutive failed reads (the cluster stopped) after which the watcher ends
_GIVE_UP = 20


@dataclass(frozen=True)
class UncleanElection:
    """An unclean election seen in the cluster's state: the partition, its leader before and the
    one elected, the new leader's log end offset when it was elected (``exact`` when read from its
    epoch checkpoint, else its log end when seen, an upper bound), the old leader's log end when
    last seen, and the monotonic times of the reads before and after."""

    topic: str
    partition: int
    old_leader: int
    new_leader: int
    new_leader_end: int
    old_leader_end: int | None
    before: float
    at: float
    exact: bool = True

    def describe(self) -> str:
        return (f"unclean election of {self.topic}/{self.partition}: broker {self.new_leader} (log end "
                f"{self.new_leader_end}{'' if self.exact else ' or below'}) elected in place of {self.old_leader}"
                f" (log end {self.old_leader_end} or above)")


class ElectionWatcher:
    """Reads the ``chaos-`` topics' partitions of ``cluster`` (a
    :class:`~minikafka.testkit.MiniKafkaCluster`) on its own thread until the cluster stops."""

    def __init__(self, cluster: Any, interval: float = 0.05) -> None:
        self.cluster = cluster
        self.interval = interval
        self._seen: dict[tuple[str, int], tuple[float, dict[str, Any]]] = {}
        self._leader: dict[tuple[str, int], tuple[int, int | None]] = {}  # last leader and its log end
        self._found: list[UncleanElection] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="election-watcher", daemon=True)

    def start(self) -> ElectionWatcher:
        self._thread.start()
        return self

    def found(self) -> list[UncleanElection]:
        """The elections seen since the last call."""
        with self._lock:
            out, self._found = self._found, []
        return out

    def _run(self) -> None:
        failures = 0
        while failures < _GIVE_UP:
            try:
                self.read()
                failures = 0
            except Exception:  # a broker restarting, or the cluster stopped
                failures += 1
            time.sleep(self.interval)

    def read(self) -> None:
        """One read of every partition of the run's topics."""
        topics = self.cluster.topics()
        for topic in sorted(t for t in topics if t.startswith("chaos-")):
            for partition in range(topics[topic]):
                now = time.monotonic()
                self._compare((topic, partition), now, self.cluster.partition(topic, partition))

    def _compare(self, tp: tuple[str, int], now: float, state: dict[str, Any]) -> None:
        ends = {r["broker"]: r["log_end_offset"] for r in state["replica_offsets"]}
        seen = self._seen.get(tp)
        leader = state["leader"]
        if seen is not None and leader >= 0 and state["leader_epoch"] > seen[1]["leader_epoch"] \
                and leader not in seen[1]["isr"]:
            start = self._epoch_start(leader, tp, state["leader_epoch"])
            old_leader, old_end = self._leader.get(tp, (-1, None))
            election = UncleanElection(tp[0], tp[1], old_leader, leader,
                                       start if start is not None else ends.get(leader, 0), old_end,
                                       seen[0], now, exact=start is not None)
            with self._lock:
                self._found.append(election)
        self._seen[tp] = (now, state)
        if leader >= 0:
            self._leader[tp] = (leader, ends.get(leader))

    def _epoch_start(self, node: int, tp: tuple[str, int], epoch: int) -> int | None:
        """Where ``epoch`` starts in broker ``node``'s log of the partition, from its checkpoint file."""
        try:
            entries = LeaderEpochCache.load(Path(self.cluster.data_dir) / f"node-{node}" / f"{tp[0]}-{tp[1]}").entries
        except (OSError, LeaderEpochFileError):
            return None
        return next((e.start_offset for e in entries if e.epoch == epoch), None)
