"""Watching a cluster under the nemesis for unclean leader elections.

Any fault can cause one once the topic allows it (a crash of the last in-sync replica, a broker
started while its partitions have no leader), not only the nemesis's ``unclean-election``, so a
thread reads the run's partitions from the cluster's controls every ``interval`` seconds: a new
leader epoch whose leader was not in the ISR seen just before is an unclean election. Where the
new leader's log ended when it was elected is read from its ``leader-epoch-checkpoint``: a new
leader records there the epoch it starts and its log end offset at that moment, exactly. The new
leader's log may differ from the old one's below its log end too (a replica started again with a
stale log, elected before it truncated): the records from where the two logs part were only the old
leader's. Where they part is found from both epoch checkpoints, as the old leader finds it when it
follows again and truncates. The election happened between the two reads, ``before`` and ``at``; an ISR that changed and an
election made between two reads are missed, which leaves the losses unexplained (reported as
anomalies), never the other way round.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from minikafka.storage.leader_epoch import LeaderEpochCache, LeaderEpochFileError

#: consecutive failed reads (the cluster stopped) after which the watcher ends
_GIVE_UP = 20


@dataclass(frozen=True)
class UncleanElection:
    """An unclean election seen in the cluster's state: the partition, its leader before and the
    one elected, the first offset only the old leader had (``new_leader_end``: the new leader's log
    end when it was elected, or where the two logs part if lower; ``exact`` when read from the
    epoch checkpoints, else the new leader's log end when seen, an upper bound), the old leader's
    log end when last seen, and the monotonic times of the reads before and after."""

    topic: str
    partition: int
    old_leader: int
    new_leader: int
    new_leader_end: int
    old_leader_end: int | None
    before: float
    at: float
    exact: bool = True
    #: the new leader's log end when it was elected, when the logs part below it
    new_leader_log_end: int | None = None

    def describe(self) -> str:
        end = f"log end {self.new_leader_end}" if self.new_leader_log_end is None else \
            f"log end {self.new_leader_log_end}, parting from the old leader's at {self.new_leader_end}"
        return (f"unclean election of {self.topic}/{self.partition}: broker {self.new_leader} ({end}"
                f"{'' if self.exact else ' or below'}) elected in place of {self.old_leader}"
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
            parting = self._parting(leader, old_leader, tp, start, old_end) if start is not None else None
            election = UncleanElection(tp[0], tp[1], old_leader, leader,
                                       start if start is not None else ends.get(leader, 0), old_end,
                                       seen[0], now, exact=start is not None)
            if parting is not None and start is not None and parting < start:
                election = replace(election, new_leader_end=parting, new_leader_log_end=start)
            with self._lock:
                self._found.append(election)
        self._seen[tp] = (now, state)
        if leader >= 0:
            self._leader[tp] = (leader, ends.get(leader))

    def _epochs(self, node: int, tp: tuple[str, int]) -> LeaderEpochCache | None:
        """Broker ``node``'s epoch cache of the partition, from its checkpoint file."""
        try:
            return LeaderEpochCache.load(Path(self.cluster.data_dir) / f"node-{node}" / f"{tp[0]}-{tp[1]}")
        except (OSError, LeaderEpochFileError):
            return None

    def _epoch_start(self, node: int, tp: tuple[str, int], epoch: int) -> int | None:
        """Where ``epoch`` starts in broker ``node``'s log of the partition."""
        cache = self._epochs(node, tp)
        return None if cache is None else next((e.start_offset for e in cache.entries if e.epoch == epoch), None)

    def _parting(self, new: int, old: int, tp: tuple[str, int], new_end: int, old_end: int | None) -> int | None:
        """Where the logs of the old leader and of the new one (its log end ``new_end`` when
        elected) part: the new leader's end of the old leader's latest epoch (or of the epoch
        below it that both have), capped by the old leader's own end of that epoch, as a follower
        truncates (Kafka: ``AbstractFetcherThread.truncateToEpochEndOffsets``); None when unknown."""
        new_cache, old_cache = self._epochs(new, tp), self._epochs(old, tp) if old >= 0 else None
        if new_cache is None or old_cache is None or not old_cache.entries:
            return None
        epoch, end = new_cache.end_offset_for(old_cache.latest_epoch, new_end)
        if epoch < 0:
            return None
        _, old_epoch_end = old_cache.end_offset_for(epoch, old_end if old_end is not None else end)
        return min(end, old_epoch_end) if old_epoch_end >= 0 else end
