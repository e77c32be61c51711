"""The controls of a cluster under test, for the HTTP admin endpoint and for Python tests alike.

:class:`ClusterControl` drives a running :class:`~minikafka.broker.cluster.cluster.Cluster` from
outside: crash, start, restart and shut down one broker (controlled), move a partition's leader,
cut a broker off from clients or from the other brokers (:mod:`.isolation`), slow a broker's
replica fetching, hold the cluster's fault rules, and describe the cluster as ``GET /cluster``
answers it: the controller's records with each replica's offsets read from its broker's own log.
Every method runs on the cluster's event loop.

Every broker's request interceptor is an :class:`~.isolation.IsolationInterceptor` in front of a
:class:`~.faults.FaultInjector`; the injectors share one :class:`~.faults.FaultRuleSet`, so a rule
is in force on the brokers its ``broker`` names (every broker when it names none), also after a
broker restarts (a new ``Broker`` object, a new injector over the same rules).

Slowing a follower is a fault rule of its own, ``slow-<node>``: a ``delay`` on the Fetch requests
``from_broker`` that node, on every broker. Each of its follower fetches is handled at once and
answered ``ms`` late, so once its leader has records it lacks it is not caught up for ``ms`` at a
time; longer than ``replica.lag.time.max.ms`` and it leaves the ISR (and, if it catches up before
it is healed, joins again: a slow follower flaps as in Kafka). Healing removes the rule, which
lets go of the fetches it holds.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from typing import TYPE_CHECKING, Any

from minikafka.broker.cluster.partition_state import NO_LEADER, BrokerState
from minikafka.broker.cluster.placement import PlacementError
from minikafka.broker.dispatch import build_api_table
from minikafka.broker.topics import is_internal
from minikafka.protocol.kafka_versions import release
from minikafka.testkit.console import views
from minikafka.testkit.control import transactions_of
from minikafka.testkit.faults import FaultInjector, FaultRule, FaultRuleSet
from minikafka.testkit.isolation import Isolation, IsolationInterceptor

if TYPE_CHECKING:
    from minikafka.broker.cluster.cluster import Cluster
    from minikafka.broker.cluster.partition_state import PartitionRegistration
    from minikafka.broker.server import Broker
    from minikafka.storage.log import PartitionLog

log = logging.getLogger(__name__)

#: how often a start retries its bind while the port the broker just released is still taken
_BIND_ATTEMPTS = 50
#: how long past a long poll slow() waits for the slowed follower's next fetch to arrive at a leader
_HELD_GRACE_S = 5.0


class ClusterControl:
    """Lifecycle, leadership, isolation and fault rules of a cluster's brokers (see the module docstring)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.isolation = Isolation()
        api_table = build_api_table(release(str(cluster.config.get("minikafka.kafka.version"))))  # as each Broker's
        self.faults = FaultRuleSet(api_table, list(cluster.controller.brokers), crash=True)
        self.crashes = 0
        self.restarts = 0
        self._lifecycle = asyncio.Lock()
        cluster.broker_hooks.append(self._install)  # brokers started from now on (a restart is a new Broker)
        for broker in cluster.brokers.values():
            self._install(broker)

    def _install(self, broker: Broker) -> None:
        faults = FaultInjector(broker, crash=functools.partial(self.crash_and_restart, broker.node_id), rules=self.faults)
        broker.interceptor = IsolationInterceptor(broker.node_id, self.isolation, faults)

    # ----------------------------------------------------------------- brokers
    def node(self, node_id: int) -> int:
        """``node_id`` if the cluster has that broker; KeyError (404 over HTTP) if not."""
        if node_id not in self.cluster.controller.brokers:
            raise KeyError(f"no broker {node_id} (the cluster has brokers 1 to {self.cluster.size})")
        return node_id

    def up(self, node_id: int) -> bool:
        broker = self.cluster.brokers.get(node_id)
        return broker is not None and broker.started

    @property
    def running(self) -> bool:
        """Every broker is up and active at the controller."""
        return all(self.up(n) for n in self.cluster.controller.brokers) and \
            self.cluster.controller.active() == set(self.cluster.controller.brokers)

    async def crash(self, node_id: int) -> None:
        """Stop broker ``node_id`` as a kill -9 would (nothing flushed); the controller fences it."""
        async with self._lifecycle:
            await self._crash(self.node(node_id))

    async def start(self, node_id: int) -> None:
        """Start broker ``node_id`` again on its port and data dir: it recovers, registers, follows."""
        async with self._lifecycle:
            await self._start(self.node(node_id))

    async def shutdown(self, node_id: int) -> None:
        """A controlled shutdown: leadership moves off the broker, then it stops cleanly."""
        async with self._lifecycle:
            if self.up(self.node(node_id)):
                await self.cluster.stop_broker(node_id, controlled=True)

    async def restart(self, node_id: int, clean: bool = True) -> None:
        """A controlled shutdown (``clean``) or a crash, then a start, as a rolling restart does."""
        async with self._lifecycle:
            self.node(node_id)
            if clean:
                if self.up(node_id):
                    await self.cluster.stop_broker(node_id, controlled=True)
            else:
                await self._crash(node_id)
            await self._start(node_id)

    async def crash_and_restart(self, node_id: int, restart_after_ms: int | None) -> None:
        """The ``crash`` fault action on broker ``node_id``: crash it now; start it again after
        ``restart_after_ms`` if given."""
        await self.crash(node_id)
        if restart_after_ms is not None:
            await asyncio.sleep(restart_after_ms / 1000)
            await self.start(node_id)

    async def _crash(self, node_id: int) -> None:
        if self.up(node_id):
            await self.cluster.crash(node_id)
            self.crashes += 1
            log.info("cluster: broker %d crashed", node_id)

    async def _start(self, node_id: int) -> None:
        if self.up(node_id):
            return
        for attempt in range(_BIND_ATTEMPTS):  # the port was just released; a reconnect may race the bind
            try:
                await self.cluster.start_broker(node_id)
                break
            except OSError:
                if attempt == _BIND_ATTEMPTS - 1:
                    raise
                await asyncio.sleep(0.02)
        self.restarts += 1

    # ----------------------------------------------------------------- leadership and isolation
    def move_leader(self, topic: str, partition: int, node_id: int) -> dict[str, Any]:
        """Make ``node_id`` lead the partition; ValueError unless it is an active in-sync replica."""
        if (topic, partition) not in self.cluster.controller.partitions:
            raise KeyError(f"no partition {topic}-{partition}")
        try:
            self.cluster.controller.move_leader(topic, partition, self.node(node_id))
        except PlacementError as exc:
            raise ValueError(str(exc)) from None
        return self.partition(topic, partition)

    def isolate(self, node_id: int, mode: str = "all") -> None:
        """Cut broker ``node_id`` off from ``clients``, ``brokers``, the ``controller`` or ``all``
        (:mod:`.isolation`); a new mode replaces the one before."""
        self.isolation.isolate(self.node(node_id), mode)
        self._controller_link(node_id)
        log.info("cluster: broker %d isolated from %s", node_id, mode)

    def _controller_link(self, node_id: int) -> None:
        """Cut or restore broker ``node_id``'s link to the controller as its isolation says."""
        if self.isolation.from_controller(node_id):
            self.cluster.cut_off_controller(node_id)
        else:
            self.cluster.reconnect_controller(node_id)

    async def slow(self, node_id: int, ms: int) -> FaultRule:
        """Answer each of broker ``node_id``'s follower fetches ``ms`` late, until :meth:`heal`
        (the rule ``slow-<node>``, see the module docstring); slowing it again changes ``ms``.
        Returns once a fetch of it is held at each leader it copies from (see :meth:`_until_held`)."""
        self.node(node_id)
        if isinstance(ms, bool) or not isinstance(ms, int) or ms <= 0:
            raise ValueError(f"slow broker {node_id} by how much: expected a number of milliseconds > 0, got {ms!r}")
        self.faults.remove(_slow_rule(node_id))
        rule = self.faults.add({"id": _slow_rule(node_id), "action": "delay", "api": "Fetch", "from_broker": node_id,
                                "trigger": "always", "delay_ms": ms})
        log.info("cluster: broker %d's follower fetches answered %d ms late", node_id, ms)
        await self._until_held(node_id, rule)
        return rule

    async def _until_held(self, node_id: int, rule: FaultRule) -> None:
        """Wait until ``rule`` holds a fetch of ``node_id`` at each leader it copies from. A fetch
        already waiting at a leader when the rule came (a long poll) is answered at full speed, and
        would carry a record written next; after this, none does. Bounded: a follower that is
        down, cut off or fenced fetches nothing, and slowing it needs no wait."""
        if not self.up(node_id) or self.isolation.from_brokers(node_id):
            return
        leaders = {part.leader for part in self.cluster.controller.partitions.values()
                   if node_id in part.replicas and part.leader not in (node_id, NO_LEADER) and self.up(part.leader)
                   and not self.isolation.from_brokers(part.leader)}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + int(self.cluster.config.get("replica.fetch.wait.max.ms")) / 1000 + _HELD_GRACE_S
        while self.faults.in_force(rule) and loop.time() < deadline and \
                any(rule.by_broker.get(leader, {}).get("fired", 0) == 0 for leader in leaders):
            await asyncio.sleep(0.01)

    def slowed_ms(self, node_id: int) -> int | None:
        """How late broker ``node_id``'s follower fetches are answered, None when it is not slowed."""
        rule = self.faults.get(_slow_rule(node_id))
        return rule.delay_ms if rule is not None else None

    def heal(self, node_id: int) -> None:
        """End broker ``node_id``'s isolation and its slowing."""
        self.isolation.heal(self.node(node_id))
        self._controller_link(node_id)
        self.faults.remove(_slow_rule(node_id))
        log.info("cluster: broker %d reachable again, at full speed", node_id)

    # ----------------------------------------------------------------- topics
    def create_topic(self, name: str, partitions: int | None = None, replication_factor: int | None = None,
                     config: dict[str, Any] | None = None) -> None:
        """Create a topic through the controller; ``partitions`` and ``replication_factor`` default
        to ``num.partitions`` and ``default.replication.factor`` as CreateTopics does."""
        settings = self.cluster.config
        count = int(settings.get("num.partitions")) if partitions is None else partitions
        factor = int(settings.get("default.replication.factor")) if replication_factor is None else replication_factor
        if factor == -1:
            factor = int(settings.get("default.replication.factor"))
        try:
            self.cluster.controller.create_topic(name, count, factor, None,
                                                 {k: str(v) for k, v in (config or {}).items()})
        except PlacementError as exc:
            raise ValueError(str(exc)) from None

    def topics(self, internal: bool = False) -> dict[str, int]:
        """Topic name -> partition count, as the controller records them."""
        return {name: record.partitions for name, record in sorted(self.cluster.controller.topics.items())
                if internal or not is_internal(name)}

    # ----------------------------------------------------------------- reading
    def describe(self) -> dict[str, Any]:
        """The body of ``GET /cluster`` (its shape is in :mod:`.admin_http`'s docstring)."""
        controller = self.cluster.controller
        listed = sorted(b.node_id for b in controller.listed())
        brokers = []
        for node_id, registration in sorted(controller.brokers.items()):
            broker = self.cluster.brokers[node_id]  # every broker was started once by Cluster.start
            brokers.append({"id": node_id, "host": broker.advertised_address()[0], "port": broker.port,
                            "rack": registration.rack, "state": self._state(node_id),
                            "isolated": self.isolation.mode(node_id), "slowed_ms": self.slowed_ms(node_id)})
        partitions = [self._partition(topic, p, part) for (topic, p), part in sorted(controller.partitions.items())]
        return {"controller": listed[0] if listed else -1, "brokers": brokers, "partitions": partitions}

    def partition(self, topic: str, partition: int) -> dict[str, Any]:
        """One partition of :meth:`describe`; KeyError when there is no such partition."""
        part = self.cluster.controller.partition(topic, partition)
        if part is None:
            raise KeyError(f"no partition {topic}-{partition}")
        return self._partition(topic, partition, part)

    def _partition(self, topic: str, partition: int, part: PartitionRegistration) -> dict[str, Any]:
        listed = {b.node_id for b in self.cluster.controller.listed()}
        leader_log = self.local_log(part.leader, topic, partition) if part.leader != NO_LEADER else None
        offsets = []
        for node_id in part.replicas:
            plog = self.local_log(node_id, topic, partition)
            if plog is not None:
                offsets.append({"broker": node_id, "log_start_offset": plog.log_start_offset,
                                "log_end_offset": plog.log_end_offset})
        return {"topic": topic, "partition": partition, "leader": part.leader, "leader_epoch": part.leader_epoch,
                "partition_epoch": part.partition_epoch, "replicas": list(part.replicas), "isr": list(part.isr),
                "offline": part.offline_replicas(listed),
                "high_watermark": None if leader_log is None else leader_log.high_watermark,
                "replica_offsets": offsets}

    def local_log(self, node_id: int, topic: str, partition: int) -> PartitionLog | None:
        """Broker ``node_id``'s own replica of the partition, while the broker runs."""
        broker = self.cluster.brokers.get(node_id)
        if broker is None or not broker.started or broker.logs is None:
            return None
        return broker.logs.get_log(topic, partition)

    def status(self) -> dict[str, Any]:
        """The body of ``GET /status`` in a cluster: the cluster as a whole."""
        return {
            "running": self.running,
            "bootstrap": self.cluster.bootstrap,
            "node_id": "cluster",
            "brokers": {str(n): self._state(n) for n in sorted(self.cluster.controller.brokers)},
            "data_dir": str(self.cluster.data_dir),
            "topics": self.topics(),
            "crashes": self.crashes,
            "restarts": self.restarts,
            "rules": len(self.faults.rules),
        }

    def console_partitions(self) -> list[dict[str, Any]]:
        """``GET /partitions`` in a cluster: each partition as its leader's log holds it (offsets,
        segments, producers), with the controller's leader, epoch, replicas and ISR."""
        out = []
        for (topic, p), part in sorted(self.cluster.controller.partitions.items()):
            leader_log = self.local_log(part.leader, topic, p) if part.leader != NO_LEADER else None
            if leader_log is None or is_internal(topic):
                continue
            seen = self._partition(topic, p, part)
            out.append({**views.partition_view(leader_log, part.leader), **seen})
        return out

    def running_brokers(self) -> list[Broker]:
        return [self.cluster.brokers[n] for n in sorted(self.cluster.brokers) if self.up(n)]

    def snapshot(self) -> dict[str, Any]:
        """The console's snapshot for a cluster, its fault rules with their counts per broker. Groups
        and transactions are gathered from every running broker: each coordinates those of the
        internal partitions it leads."""
        running = self.running_brokers()
        return {
            "now_ms": int(running[0].clock()) if running else int(time.time() * 1000),
            "status": self.status(),
            "partitions": self.console_partitions(),
            "transactions": [t for broker in running for t in transactions_of(broker)],
            "groups": [g for broker in running for g in views.broker_groups(broker)],
            "faults": [rule.to_dict() for rule in self.faults.rules],
        }

    def _state(self, node_id: int) -> str:
        return self.cluster.controller.brokers[node_id].state.value if self.up(node_id) else BrokerState.FENCED.value


def _slow_rule(node_id: int) -> str:
    """The id of the fault rule that slows broker ``node_id``'s follower fetches."""
    return f"slow-{node_id}"
