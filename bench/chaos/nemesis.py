"""The nemesis: faults on a seeded random schedule, driven through minikafka's controls.

The schedule is drawn up front from the seed alone (:func:`schedule`), so a run's faults are
reproduced by its seed and printed in its report; what the clients happen to be doing when a
fault lands depends on timing and is not reproduced.

A fault acts on a :class:`Target`. :class:`SingleBroker` is one in-process broker
(:class:`minikafka.testkit.MiniKafka`), with the faults one broker has:

``crash``          crash (nothing flushed, no clean-shutdown marker), stay down, start again
``outage``         the same, down 6–12 s: past the clients' transaction timeout (10 s), so
                   transactions fail and time out, and sends may end unknown
``restart-dirty``  ``restart(clean=False)``: crash and recover at once
``restart-clean``  a clean restart (flush, snapshot, marker)
``drop-produce``   the next Produce requests are appended and their answers lost
``drop-txn``       the next AddPartitionsToTxn / TxnOffsetCommit / EndTxn / AddOffsetsToTxn
                   requests are handled and their answers lost
``delay``          every answer held back ``delay_ms`` for a while
``error-after``    the next Produce requests are appended, then answered NOT_LEADER_OR_FOLLOWER
``crash-on-produce``, ``crash-on-txn``
                   the next Produce (or transaction API) request is handled, then the broker
                   crashes before answering and starts again ``restart_ms`` later

A cluster target adds the actions of :data:`CLUSTER_ACTIONS` (crash or shut down broker N, move
a leader, isolate a broker from the others, from the clients, from the controller or from all
three, slow a follower) to the fault and
crash rules, which it installs on one broker; a target says
which actions it supports, and the schedule draws only from those.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from bench.chaos.cluster_watch import ElectionWatcher, UncleanElection
from bench.chaos.history import OK, UNKNOWN, History, tp_key

SINGLE_BROKER_ACTIONS = ("crash", "outage", "restart-dirty", "restart-clean", "drop-produce", "drop-txn", "delay",
                         "error-after", "crash-on-produce", "crash-on-txn")
#: what a multi-broker target will add; :class:`ClusterControls` is the interface they need
CLUSTER_ACTIONS = ("crash-broker", "controlled-shutdown", "move-leader", "isolate-from-brokers",
                   "isolate-from-clients", "isolate-from-controller", "partition-broker", "unclean-election",
                   "slow-follower")
TXN_APIS = ["AddPartitionsToTxn", "AddOffsetsToTxn", "TxnOffsetCommit", "EndTxn"]
#: the faults that are fault rules of the test kit: a single broker's, or on a cluster one broker's
RULE_ACTIONS = ("drop-produce", "drop-txn", "delay", "error-after")
#: the crash rules: a request handled, then the broker crashes before it answers, and starts again
CRASH_ACTIONS = ("crash-on-produce", "crash-on-txn")


def add_rule(faults: Any, fault: Fault, **where: Any) -> Any:
    """Install the fault rule of ``fault`` (one of :data:`RULE_ACTIONS` or :data:`CRASH_ACTIONS`)
    in ``faults`` (a ``MiniKafka``'s or a ``MiniKafkaCluster``'s; ``broker=`` limits it to one
    broker): answers of Produce or of the transaction APIs lost after they were handled, every
    answer delayed, Produce answered NOT_LEADER_OR_FOLLOWER after its append, or the broker crashed
    after it handled the next Produce (or transaction) request and started again."""
    if fault.action == "drop-produce":
        return faults.drop_response(api="Produce", trigger="next", n=fault.params["n"], **where)
    if fault.action == "drop-txn":
        return faults.drop_response(api=TXN_APIS, trigger="next", n=fault.params["n"], **where)
    if fault.action == "delay":
        return faults.delay(fault.params["delay_ms"], trigger="always", **where)
    if fault.action == "error-after":
        return faults.error_after("NOT_LEADER_OR_FOLLOWER", api="Produce", trigger="next", n=fault.params["n"], **where)
    if fault.action in CRASH_ACTIONS:
        api = "Produce" if fault.action == "crash-on-produce" else TXN_APIS
        return faults.crash(restart_after_ms=fault.params["restart_ms"], api=api, trigger="once", **where)
    raise ValueError(f"{fault.action!r} is not a fault rule")


@dataclass(frozen=True)
class Fault:
    """One scheduled fault: ``at`` seconds into the run, held for ``duration`` seconds."""

    at: float
    action: str
    duration: float
    params: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        extra = "".join(f" {k}={v}" for k, v in sorted(self.params.items()))
        return f"t={self.at:6.2f}s {self.action} for {self.duration:.2f}s{extra}"


class Target(Protocol):
    """What the nemesis drives: each action applied, and undone after its duration."""

    actions: tuple[str, ...]

    def apply(self, fault: Fault) -> Any: ...
    def elections(self) -> list[UncleanElection]: ...
    def undo(self, fault: Fault, handle: Any) -> str: ...
    def heal(self) -> None: ...


class ClusterControls(Protocol):
    """What :class:`ClusterTarget` and its watcher use of a multi-broker minikafka: the methods of
    :class:`~minikafka.testkit.MiniKafkaCluster` (which reach the cluster's controls on its thread).
    ``slow(node, ms)`` delays a follower's fetches at its leaders until ``heal(node)``."""

    brokers: list[int]
    data_dir: Any

    def topics(self, internal: bool = False) -> dict[str, int]: ...
    def partition(self, topic: str, partition: int = 0) -> dict[str, Any]: ...
    def leader(self, topic: str, partition: int = 0) -> int: ...
    def isr(self, topic: str, partition: int = 0) -> list[int]: ...
    def describe(self) -> dict[str, Any]: ...
    def crash(self, node_id: int) -> None: ...
    def start_broker(self, node_id: int) -> None: ...
    def shutdown(self, node_id: int) -> None: ...
    def move_leader(self, topic: str, partition: int, node_id: int) -> dict[str, Any]: ...
    def isolate(self, node_id: int, from_: str = "all") -> None: ...
    def slow(self, node_id: int, ms: int) -> Any: ...
    @property
    def faults(self) -> Any: ...
    def heal(self, node_id: int) -> None: ...


def schedule(seed: int, seconds: float, actions: tuple[str, ...], interval: float = 4.0,
             quiet_start: float = 2.0, quiet_end: float = 3.0) -> list[Fault]:
    """Faults drawn from ``seed``: one every ``interval`` seconds on average, none in the first
    ``quiet_start`` or last ``quiet_end`` seconds, each over before the next begins."""
    rng = random.Random(f"nemesis-{seed}")
    out: list[Fault] = []
    t = quiet_start + rng.uniform(0, interval / 2)
    while True:
        action = rng.choice(actions)
        duration = round(rng.uniform(6.0, 12.0) if action == "outage" else rng.uniform(0.3, min(3.0, interval * 0.6)), 2)
        if t + duration > seconds - quiet_end:
            return out
        params: dict[str, Any] = {}
        if action in ("drop-produce", "drop-txn", "error-after"):
            params["n"] = rng.randint(1, 3)
        elif action in ("crash-on-produce", "crash-on-txn"):
            params["restart_ms"] = rng.choice([100, 300, 1000])
        elif action == "delay":
            params["delay_ms"] = rng.choice([50, 200, 500, 1500])
        elif action in CLUSTER_ACTIONS:
            params["pick"] = rng.randrange(1000)  # which broker, partition or replica
            if action == "slow-follower":
                params["delay_ms"] = rng.choice([200, 500, 1500])
        out.append(Fault(round(t, 2), action, duration, params))
        t += duration + rng.uniform(interval / 2, interval * 1.5)


class SingleBroker:
    """The faults of one :class:`~minikafka.testkit.MiniKafka` broker (see the module doc)."""

    actions: tuple[str, ...] = SINGLE_BROKER_ACTIONS

    def __init__(self, kafka: Any) -> None:
        self.kafka = kafka

    def apply(self, fault: Fault) -> Any:
        faults = self.kafka.faults
        if fault.action in ("crash", "outage"):
            self.kafka.crash()
        elif fault.action == "restart-dirty":
            self.kafka.restart(clean=False)
        elif fault.action == "restart-clean":
            self.kafka.restart(clean=True)
        elif fault.action in RULE_ACTIONS + CRASH_ACTIONS:
            return add_rule(faults, fault)
        else:
            raise ValueError(f"a single broker has no fault {fault.action!r}")
        return None

    def elections(self) -> list[UncleanElection]:
        """One broker elects nothing."""
        return []

    def undo(self, fault: Fault, handle: Any) -> str:
        """Undo the fault; a line on what it did (how many requests a rule hit)."""
        if fault.action in ("crash", "outage"):
            self.kafka.start_again()
            return "down and started again"
        if handle is None:
            return "done"
        self.kafka.faults.remove(handle)
        if fault.action.startswith("crash-on"):
            self._until_running(fault.params["restart_ms"] / 1000 + 10)
        return f"fired on {handle.fired} request(s)"

    def _until_running(self, seconds: float) -> None:
        """Wait for a crash rule's own restart (bounded), so the next fault finds the broker up."""
        deadline = time.monotonic() + seconds
        while not self.kafka.running and time.monotonic() < deadline:
            time.sleep(0.05)

    def heal(self) -> None:
        self.kafka.faults.clear()
        if not self.kafka.running:
            self.kafka.start_again()


class ClusterTarget:
    """The faults of a :class:`~minikafka.testkit.MiniKafkaCluster`: a broker crashed or shut down
    (controlled) and started again after the fault's duration, a partition's leader moved to another
    in-sync replica, a broker cut off from the other brokers, from the clients, from the controller
    (past the cluster's ``broker.session.timeout.ms`` it is fenced and its partitions led elsewhere
    while it still believes it leads them, a zombie until healed) or from all three
    (``partition-broker``) and healed, and the
    single broker's fault rules (:data:`RULE_ACTIONS`: lost answers, delays, an error after the
    append) and crash rules (:data:`CRASH_ACTIONS`: the broker crashes after it handled a Produce,
    which ``acks=all`` had it replicate first, or a transaction request, before it answers, and
    starts again) on one broker. The broker and partition are drawn from the fault's own seeded
    parameters.

    With ``unclean`` (the run's topic has ``unclean.leader.election.enable=true``) it also makes
    ``unclean-election``: a follower of a partition is cut off from the other brokers until it has
    left the ISR and the others have taken acknowledged writes it lacks, then every other broker
    crashes, so the lagging replica is the only one left and is elected; it is healed at once, and
    the others start again after the fault's duration and truncate to it. Any fault may then cause
    an unclean election (the last in-sync replica crashed), so an :class:`ElectionWatcher` reads the
    cluster throughout and :meth:`elections` hands over what it saw.

    ``slow-follower`` answers every fetch a broker sends as a follower late (the delay drawn in
    :func:`schedule`) until it is healed: acks=all writes wait for it, and with a delay past
    ``replica.lag.time.max.ms`` it leaves the ISR.
    """

    base_actions: tuple[str, ...] = ("crash-broker", "controlled-shutdown", "move-leader", "isolate-from-brokers",
                                     "isolate-from-clients", "isolate-from-controller", "partition-broker",
                                     "slow-follower", *RULE_ACTIONS, *CRASH_ACTIONS)

    def __init__(self, cluster: ClusterControls, unclean: bool = False, out_of_sync_within: float = 20.0) -> None:
        self.cluster = cluster
        self.actions = self.base_actions + (("unclean-election",) if unclean else ())
        self.out_of_sync_within = out_of_sync_within
        self.watcher = ElectionWatcher(cluster).start() if unclean else None

    def _node(self, fault: Fault) -> int:
        """The broker of ``fault``: drawn in its parameters, or for a fault rule (whose
        parameters are a single broker's) from its seeded time."""
        brokers = sorted(self.cluster.brokers)
        pick = fault.params["pick"] if "pick" in fault.params else int(fault.at * 1000)
        return brokers[int(pick) % len(brokers)]

    def _partition(self, fault: Fault) -> tuple[str, int] | None:
        """The run's topic (the first ``chaos-`` topic) and the partition the fault picks."""
        topics = sorted(t for t in self.cluster.topics() if t.startswith("chaos-"))
        if not topics:
            return None
        return topics[0], int(fault.params.get("pick", 0)) % self.cluster.topics()[topics[0]]

    def apply(self, fault: Fault) -> Any:
        node = self._node(fault)
        if fault.action in RULE_ACTIONS + CRASH_ACTIONS:
            return node, add_rule(self.cluster.faults, fault, broker=node)
        if fault.action == "crash-broker":
            self.cluster.crash(node)
        elif fault.action == "controlled-shutdown":
            self.cluster.shutdown(node)
        elif fault.action == "isolate-from-brokers":
            self.cluster.isolate(node, "brokers")
        elif fault.action == "isolate-from-clients":
            self.cluster.isolate(node, "clients")
        elif fault.action == "isolate-from-controller":
            self.cluster.isolate(node, "controller")
        elif fault.action == "partition-broker":
            self.cluster.isolate(node, "all")
        elif fault.action == "slow-follower":
            self.cluster.slow(node, int(fault.params.get("delay_ms", 500)))
        elif fault.action == "move-leader":
            return self._move_leader(fault)
        elif fault.action == "unclean-election":
            return self._unclean_election(fault)
        else:
            raise ValueError(f"a cluster has no fault {fault.action!r}")
        return node

    def _move_leader(self, fault: Fault) -> str:
        where = self._partition(fault)
        if where is None:
            return "no topic yet"
        topic, partition = where
        isr = [n for n in self.cluster.isr(topic, partition) if n != self.cluster.leader(topic, partition)]
        if not isr:
            return f"{topic}-{partition} has no other in-sync replica"
        self.cluster.move_leader(topic, partition, isr[int(fault.params.get("pick", 0)) % len(isr)])
        return f"{topic}-{partition} moved"

    def _unclean_election(self, fault: Fault) -> list[int] | str:
        """Cut a follower off, wait until it is out of sync, crash every other broker (see the class
        doc); the brokers crashed."""
        where = self._partition(fault)
        if where is None:
            return "no topic yet"
        topic, partition = where
        state = self.cluster.partition(topic, partition)
        followers = [n for n in state["replicas"] if n != state["leader"]]
        if state["leader"] < 0 or not followers:
            return f"{topic}-{partition} has no leader, or no follower"
        lagging = followers[int(fault.params.get("pick", 0)) % len(followers)]
        self.cluster.isolate(lagging, "brokers")
        try:
            if not self._left_isr(topic, partition, lagging):
                return f"broker {lagging} still in sync on {topic}-{partition} after {self.out_of_sync_within:g} s"
            time.sleep(1.0)  # acknowledged writes it lacks
            others = [n for n in sorted(self.cluster.brokers) if n != lagging]
            for node in sorted(others, key=lambda n: n == state["leader"]):  # the leader last
                self.cluster.crash(node)
        finally:
            self.cluster.heal(lagging)
        return others

    def _left_isr(self, topic: str, partition: int, node: int) -> bool:
        deadline = time.monotonic() + self.out_of_sync_within
        while node in self.cluster.isr(topic, partition):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    def elections(self) -> list[UncleanElection]:
        """The unclean elections seen since the last call."""
        return self.watcher.found() if self.watcher is not None else []

    def undo(self, fault: Fault, handle: Any) -> str:
        if fault.action in ("crash-broker", "controlled-shutdown"):
            self.cluster.start_broker(handle)
            return f"broker {handle} down and started again"
        if fault.action.startswith("isolate") or fault.action == "partition-broker":
            state = next(b["state"] for b in self.cluster.describe()["brokers"] if b["id"] == handle)
            self.cluster.heal(handle)
            return f"broker {handle} cut off ({state} at the controller) and healed"
        if fault.action in RULE_ACTIONS + CRASH_ACTIONS:
            node, rule = handle
            self.cluster.faults.remove(rule)
            if fault.action in CRASH_ACTIONS:
                self.cluster.start_broker(node)  # if the crash's own restart is still to come
            return f"broker {node}: fired on {rule.fired} request(s)"
        if fault.action == "slow-follower":
            self.cluster.heal(handle)
            return f"broker {handle}'s fetches slowed by {fault.params.get('delay_ms')} ms, then healed"
        if fault.action == "unclean-election" and isinstance(handle, list):
            for node in handle:
                self.cluster.start_broker(node)
            return f"brokers {handle} crashed and started again"
        return str(handle)

    def heal(self) -> None:
        self.cluster.faults.clear()
        for node in sorted(self.cluster.brokers):
            self.cluster.heal(node)
            self.cluster.start_broker(node)


class Nemesis:
    """Runs a schedule against a target on its own thread, logging each fault as a ``fault`` op."""

    def __init__(self, target: Target, faults: list[Fault], history: History) -> None:
        self.target = target
        self.faults = faults
        self.history = history
        self.applied: list[tuple[Fault, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)
        self._origin = 0.0

    def start(self) -> None:
        self._origin = time.monotonic()
        self._thread.start()

    def stop(self) -> None:
        """Stop drawing faults, undo the one in progress and heal everything."""
        self._stop.set()
        self._thread.join(120)
        self.target.heal()
        time.sleep(0.5)  # the elections the healing made, seen by a watcher
        self._record_elections()

    def _run(self) -> None:
        for fault in self.faults:
            if self._stop.wait(max(0.0, self._origin + fault.at - time.monotonic())):
                return
            index, start = self.history.begin()
            outcome, info = UNKNOWN, ""
            try:
                handle = self.target.apply(fault)
                self._record_elections()
                self._stop.wait(fault.duration)
                info = self.target.undo(fault, handle)
                self._record_elections()
                outcome = OK
            except Exception as exc:  # the run goes on; the report shows the fault that failed
                info = f"error: {exc!r}"
            self.history.record(index, start, "nemesis", "fault", outcome,
                                info=f"{fault.action} {fault.params or ''} {info}".strip())
            self.applied.append((fault, info))

    def _record_elections(self) -> None:
        """An ``election`` operation for each unclean election the target saw: what the checker
        needs to tell a loss it explains from a lost write."""
        for election in self.target.elections():
            index, _ = self.history.begin()
            self.history.record(index, election.before, "nemesis", "election", OK, end=election.at,
                                offsets={tp_key(election.topic, election.partition): election.new_leader_end},
                                info=election.describe())
