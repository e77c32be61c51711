"""N brokers in one process that replicate and fail over: ``minikafka serve --brokers N``.

Each broker is a whole :class:`~minikafka.broker.server.Broker` with its own listener (``--port``,
``--port``+1, ...; free ports with ``--port 0``) and its own data dir ``<data-dir>/node-<id>``
holding Kafka-format replicas of the partitions it hosts. They share one
:class:`~minikafka.broker.cluster.controller.Controller` (in the process: no KRaft quorum between
brokers), whose records are kept in ``<data-dir>/cluster-metadata.json``, and talk to each other
only over the Kafka protocol on loopback. The test kit crashes, stops, restarts and isolates
brokers through :meth:`Cluster.crash`, :meth:`Cluster.start_broker` and the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from minikafka.broker.cluster.controller import Controller, PartitionChange
from minikafka.broker.cluster.metadata_file import MetadataFile, MetadataFileError
from minikafka.broker.cluster.partition_state import NO_LEADER, BrokerState
from minikafka.broker.cluster.placement import PlacementError
from minikafka.broker.groups.records import OFFSETS_TOPIC
from minikafka.broker.internal_log import internal_topic_configs
from minikafka.broker.internal_records import partition_for
from minikafka.broker.transactions.records import TRANSACTION_STATE_TOPIC
from minikafka.config import BrokerConfig, list_setting
from minikafka.errors import ErrorCode
from minikafka.startup_errors import ConfigError, DataDirError
from minikafka.storage.dir_lock import DataDirLock
from minikafka.storage.producer_ids import ProducerIdAllocator

if TYPE_CHECKING:
    from minikafka.broker.cluster.replica_manager import ReplicaManager
    from minikafka.broker.server import Broker

log = logging.getLogger(__name__)

MAX_BROKERS = 16


@dataclass(frozen=True)
class InternalTopic:
    """The settings an internal topic of the coordinators is created with in a cluster."""

    partitions_setting: str
    replication_setting: str
    segment_setting: str
    min_isr_setting: str | None = None


INTERNAL_TOPICS = {
    OFFSETS_TOPIC: InternalTopic("offsets.topic.num.partitions", "offsets.topic.replication.factor",
                                 "offsets.topic.segment.bytes"),
    TRANSACTION_STATE_TOPIC: InternalTopic("transaction.state.log.num.partitions",
                                           "transaction.state.log.replication.factor",
                                           "transaction.state.log.segment.bytes", "transaction.state.log.min.isr"),
}


def coordinator_topic(kind: str) -> str:
    """The internal topic of a coordinator ``kind``: "group" or "transaction"."""
    topics = {"group": OFFSETS_TOPIC, "transaction": TRANSACTION_STATE_TOPIC}
    if kind not in topics:
        raise ValueError(f"coordinator kind {kind!r}: expected 'group' or 'transaction'")
    return topics[kind]


class ClusterLink:
    """What one broker of a cluster is given: the shared controller and where its peers listen."""

    def __init__(self, cluster: Cluster, node_id: int) -> None:
        self.cluster = cluster
        self.node_id = node_id

    @property
    def controller(self) -> Controller:
        return self.cluster.controller

    def controller_reachable(self) -> bool:
        """Whether this broker's requests reach the controller (see :meth:`Cluster.cut_off_controller`)."""
        return self.node_id not in self.cluster.cut_from_controller

    def address_of(self, node_id: int) -> tuple[str, int] | None:
        """Where broker ``node_id`` listens, or None while it is down."""
        broker = self.cluster.brokers.get(node_id)
        if broker is None or not broker.started:
            return None
        return broker.advertised_address()

    def peer_address_of(self, node_id: int) -> tuple[str, int] | None:
        """Where another broker of this process reaches broker ``node_id``: the address it is bound
        to, not the one clients are told (in a container the advertised host and port are the
        outside's, often not reachable from inside)."""
        broker = self.cluster.brokers.get(node_id)
        if broker is None or not broker.started or broker.listener() is None:
            return None
        host = broker.host
        return ("127.0.0.1" if host in ("0.0.0.0", "", "::") else host), broker.port

    @property
    def producer_ids(self) -> ProducerIdAllocator:
        """The cluster's one producer-id allocator (Kafka's controller hands out id blocks)."""
        return self.cluster.producer_ids

    def delete_topic(self, name: str) -> None:
        self.cluster.delete_topic(name)

    def alter_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        self.cluster.alter_topic_configs(name, configs)

    def group_overrides(self, group_id: str) -> dict[str, str]:
        """A group's dynamic configs, as the controller records them (every broker reads the same)."""
        return self.controller.group_configs.get(group_id, {})

    def set_group_overrides(self, group_id: str, configs: Mapping[str, str]) -> None:
        self.cluster.alter_group_configs(group_id, dict(configs))

    def coordinator(self, topic: str, key: str) -> tuple[ErrorCode, int]:
        """Which broker coordinates ``key`` (a group id in ``__consumer_offsets``, a transactional id
        in ``__transaction_state``): the leader of the key's partition of ``topic``, as Kafka's
        FindCoordinator answers. The first lookup creates the topic and answers
        COORDINATOR_NOT_AVAILABLE (the client asks again), as does a partition with no live leader."""
        if not self.cluster.ensure_internal_topic(topic):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, NO_LEADER
        controller = self.controller
        part = controller.partition(topic, partition_for(key, controller.topics[topic].partitions))
        if part is None or part.leader not in controller.active():
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, NO_LEADER
        return ErrorCode.NONE, part.leader

    def coordinating_broker(self, topic: str, key: str) -> Broker | None:
        """The running broker that leads ``key``'s partition of ``topic`` (see :meth:`coordinator`)
        without creating anything; None when there is none."""
        broker = self.cluster.brokers.get(self.cluster.coordinator_of(topic, key))
        return broker if broker is not None and broker.started else None

    def internal_partitions(self, topic: str) -> int:
        """How many partitions the internal ``topic`` has, or will have when it is created."""
        record = self.controller.topics.get(topic)
        if record is not None:
            return record.partitions
        return int(self.cluster.config.get(INTERNAL_TOPICS[topic].partitions_setting))



class Cluster:
    """The brokers of one cluster and their controller (see the module docstring)."""

    def __init__(self, config: BrokerConfig, brokers: int) -> None:
        if not 1 <= brokers <= MAX_BROKERS:
            raise ConfigError(f"--brokers {brokers}: expected from 1 to {MAX_BROKERS}")
        self.config = config
        self.size = brokers
        self.data_dir = Path(config.data_dir)
        racks = list_setting(str(config.get("broker.rack")))
        self.racks: dict[int, str | None] = {i: (racks[(i - 1) % len(racks)] if racks else None)
                                             for i in range(1, brokers + 1)}
        self.controller = Controller(list(self.racks.items()), unclean_allowed=self._unclean_allowed,
                                     on_change=self._changed)
        self.metadata = MetadataFile(self.data_dir)
        self.brokers: dict[int, Broker] = {}
        #: called with each new Broker object before it starts (the test kit sets its interceptor here)
        self.broker_hooks: list[Callable[[Broker], None]] = []
        self._lock = DataDirLock(self.data_dir)
        self._balancer: asyncio.Task[None] | None = None
        #: brokers cut off from the controller (:meth:`cut_off_controller`), each with the task that
        #: fences it when its session expires
        self.cut_from_controller: dict[int, asyncio.Task[None] | None] = {}
        #: shared by every broker, kept in the cluster's data dir: two producers never get one id
        self.producer_ids = ProducerIdAllocator(self.data_dir)

    def node_config(self, node_id: int) -> BrokerConfig:
        """Broker ``node_id``'s settings: the cluster's, its own port and data dir. A broker that
        ran before comes back on the port it had, as a restarted Kafka broker does."""
        earlier = self.brokers.get(node_id)
        port = earlier.port if earlier is not None else self.config.port + node_id - 1 if self.config.port else 0
        if self.config.port and port > 65535:
            raise ConfigError(f"--port {self.config.port}: broker {node_id} would listen on {port}")
        settings = {k: v for k, v in self.config.settings.items() if k != "broker.rack"}
        # an advertised port (a container's published one) counts up with the ports, as they do
        advertised_port = self.config.advertised_port + node_id - 1 if self.config.advertised_port else None
        if advertised_port is not None and advertised_port > 65535:
            raise ConfigError(f"--advertised-port {self.config.advertised_port}: broker {node_id} would be "
                              f"advertised on {advertised_port}")
        return dataclasses.replace(self.config, node_id=node_id, port=port, advertised_port=advertised_port,
                                   data_dir=str(self.data_dir / f"node-{node_id}"), settings=settings,
                                   cluster_id=self.controller.cluster_id)

    # ----------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._lock.acquire()
        try:
            if not self.metadata.load_into(self.controller):
                self.metadata.save(self.controller)  # a new cluster: its id from the first start on
        except MetadataFileError as exc:
            self._lock.release()
            raise DataDirError(str(exc)) from exc
        try:
            for node_id in range(1, self.size + 1):
                await self.start_broker(node_id)
        except BaseException:
            await self.stop()
            raise
        if self.config.get("auto.leader.rebalance.enable"):
            self._balancer = asyncio.create_task(self._balance_leaders(), name="leader-balancer")

    async def stop(self) -> None:
        if self._balancer is not None:
            self._balancer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._balancer
            self._balancer = None
        for node_id in sorted(self.brokers, reverse=True):
            await self.stop_broker(node_id, controlled=False)
        for node_id in list(self.cut_from_controller):
            self._end_session_timer(node_id)
        self._lock.release()

    async def start_broker(self, node_id: int) -> Broker:
        """Start broker ``node_id`` (again), recover its logs, and register it with the controller."""
        from minikafka.broker.server import Broker

        broker = self.brokers.get(node_id)
        if broker is not None and broker.started:
            return broker
        broker = Broker(self.node_config(node_id), cluster=ClusterLink(self, node_id))
        self.brokers[node_id] = broker
        for hook in self.broker_hooks:
            hook(broker)
        await broker.start()
        if node_id in self.cut_from_controller:  # it cannot register: fenced until it is reconnected
            log.info("cluster: broker %d is up, cut off from the controller", node_id)
            return broker
        self.controller.unfence(node_id)
        log.info("cluster: broker %d is up", node_id)
        return broker

    async def crash(self, node_id: int) -> None:
        """Stop broker ``node_id`` as a crash would; the controller fences it at once."""
        broker = self.brokers[node_id]
        await broker.stop(clean=False)
        self.controller.fence(node_id)

    async def stop_broker(self, node_id: int, controlled: bool = True) -> None:
        """A clean stop; ``controlled`` moves its leadership away first (Kafka's controlled shutdown)."""
        broker = self.brokers[node_id]
        if controlled and broker.started and node_id not in self.cut_from_controller:
            self.controller.begin_controlled_shutdown(node_id)
        await broker.stop(clean=True)
        if self.controller.brokers[node_id].state is not BrokerState.FENCED:
            self.controller.fence(node_id)

    # ----------------------------------------------------------------- the controller link
    def cut_off_controller(self, node_id: int) -> None:
        """Broker ``node_id`` loses its link to the controller (a network partition; the test kit's
        isolation from ``controller`` or ``all``), as a KRaft broker cut off from the quorum:

        - the controller hears no heartbeat from it and fences it once ``broker.session.timeout.ms``
          has passed: it leaves every ISR and its partitions get new leaders;
        - it hears of no change (its replicas keep the leaders and epochs it knew, so a leader
          keeps leading, a zombie once fenced: its acks=all writes wait for followers that have
          moved on, its acks=1 writes are lost when it truncates later);
        - its ISR changes wait, unsent, as Kafka's AlterPartition requests wait for the controller.

        :meth:`reconnect_controller` ends it. Answers built from the controller's records (Metadata,
        FindCoordinator) stay current on it: minikafka keeps no per-broker copy of them."""
        if node_id in self.cut_from_controller:
            return
        self.cut_from_controller[node_id] = asyncio.get_running_loop().create_task(
            self._expire_session(node_id), name=f"broker-{node_id}-session")
        log.info("cluster: broker %d cut off from the controller", node_id)

    def reconnect_controller(self, node_id: int) -> None:
        """Broker ``node_id`` reaches the controller again: it takes up every change it missed
        (truncating where its log diverged, as any follower does), its waiting ISR changes are
        answered, and a fenced broker registers again."""
        if node_id not in self.cut_from_controller:
            return
        self._end_session_timer(node_id)
        del self.cut_from_controller[node_id]
        broker = self.brokers.get(node_id)
        if broker is None or not broker.started:
            return
        if broker.replicas is not None:
            broker.replicas.catch_up()
        if self.controller.brokers[node_id].state is BrokerState.FENCED:
            self.controller.unfence(node_id)
        log.info("cluster: broker %d reaches the controller again", node_id)

    async def _expire_session(self, node_id: int) -> None:
        await asyncio.sleep(int(self.config.get("broker.session.timeout.ms")) / 1000)
        if self.controller.brokers[node_id].state is not BrokerState.FENCED:
            log.info("cluster: broker %d's session expired at the controller: fenced", node_id)
            self.controller.fence(node_id)

    def _end_session_timer(self, node_id: int) -> None:
        task = self.cut_from_controller.get(node_id)
        if task is not None:
            task.cancel()
            self.cut_from_controller[node_id] = None

    # ----------------------------------------------------------------- topics
    def ensure_internal_topic(self, topic: str) -> bool:
        """Whether the coordinators' internal ``topic`` exists; if not, create it now (Kafka does
        on the first FindCoordinator for it): ``offsets.topic.num.partitions`` or
        ``transaction.state.log.num.partitions`` partitions, replication factor from
        ``offsets.topic.replication.factor`` / ``transaction.state.log.replication.factor`` capped
        at the cluster's size, compacted, and for ``__transaction_state`` a minimum ISR of
        ``transaction.state.log.min.isr``. False when it was just created or cannot be yet (fewer
        live brokers than its replication factor): the caller answers COORDINATOR_NOT_AVAILABLE."""
        if topic in self.controller.topics:
            return True
        spec = INTERNAL_TOPICS[topic]
        configs = internal_topic_configs(self.config.get(spec.segment_setting))
        if spec.min_isr_setting is not None:
            configs["min.insync.replicas"] = str(self.config.get(spec.min_isr_setting))
        factor = min(int(self.config.get(spec.replication_setting)), self.size)
        try:
            self.controller.create_topic(topic, int(self.config.get(spec.partitions_setting)), factor, None, configs)
        except PlacementError as exc:
            log.warning("cluster: cannot create %s yet: %s", topic, exc)
            return False
        log.info("cluster: created %s (replication factor %d)", topic, factor)
        return False

    def coordinator_of(self, topic: str, key: str) -> int:
        """The leader of ``key``'s partition of the internal ``topic`` (NO_LEADER when it has none
        or the topic does not exist yet): the broker that coordinates the group or transactional id."""
        record = self.controller.topics.get(topic)
        if record is None:
            return NO_LEADER
        part = self.controller.partition(topic, partition_for(key, record.partitions))
        return NO_LEADER if part is None else part.leader

    def delete_topic(self, name: str) -> None:
        """DeleteTopics: the controller forgets the topic and every running broker drops its
        replicas and the committed offsets of the topic; a broker that is down drops its leftovers
        when it starts (:meth:`ReplicaManager.start`)."""
        self.controller.delete_topic(name)
        self.metadata.save(self.controller)
        for replicas in self._listening_replicas():
            replicas.forget_topic(name)
        for broker in self.brokers.values():
            if broker.started and broker.groups is not None:  # committed offsets go with the topic, as in Kafka
                broker.groups.offsets.on_topic_deleted(name)
        log.info("cluster: deleted topic %s", name)

    def alter_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """AlterConfigs / IncrementalAlterConfigs of a topic, validated by the broker that took the
        request: the controller records the new overrides with the topic (saved in the metadata
        file, as Kafka's controller writes ConfigRecords to its log), every running broker applies
        them to its replicas at once, and one that is down when it starts
        (:meth:`ReplicaManager.start`). A change that allows unclean elections elects its
        leaderless partitions. Raises PlacementError for an unknown topic."""
        self.controller.set_topic_configs(name, configs)
        self.metadata.save(self.controller)
        for replicas in self._listening_replicas():
            replicas.topic_configs_changed(name)
        self.controller.elect_leaderless(name)
        log.info("cluster: topic %s overrides now %s", name, configs)

    def alter_group_configs(self, group_id: str, configs: dict[str, str]) -> None:
        """AlterConfigs / IncrementalAlterConfigs of a group, validated by the broker that took the
        request: the controller records the group's new overrides and saves them; every broker's
        coordinator reads them from the controller, so any broker describes the same."""
        self.controller.set_group_configs(group_id, configs)
        self.metadata.save(self.controller)
        log.info("cluster: group %s overrides now %s", group_id, configs)

    async def _balance_leaders(self) -> None:
        """``auto.leader.rebalance.enable``: every ``leader.imbalance.check.interval.seconds``, give
        back leadership to preferred leaders that are in sync again (Kafka's controller does the
        same on that interval; ``leader.imbalance.per.broker.percentage`` is ignored, as in KRaft)."""
        interval = max(float(self.config.get("leader.imbalance.check.interval.seconds")), 0.01)
        while True:
            await asyncio.sleep(interval)
            moved = self.controller.balance_leaders()
            if moved:
                log.info("cluster: preferred leaders back for %s", ", ".join(f"{t}-{p}" for t, p in moved))

    # ----------------------------------------------------------------- controller hooks
    def _changed(self, changes: list[PartitionChange]) -> None:
        """The controller decided: its records are saved (once per decision: a topic of 50
        partitions is one write), then every running broker that reaches the controller takes up
        each change."""
        self.metadata.save(self.controller)
        for change in changes:
            for replicas in self._listening_replicas():
                replicas.apply(change)

    def _listening_replicas(self) -> list[ReplicaManager]:
        """The replica managers of the running brokers that hear the controller (not cut off)."""
        return [broker.replicas for node_id, broker in self.brokers.items()
                if broker.started and broker.replicas is not None and node_id not in self.cut_from_controller]

    def _unclean_allowed(self, topic: str) -> bool:
        overrides = self.controller.topics[topic].configs if topic in self.controller.topics else {}
        value = overrides.get("unclean.leader.election.enable")
        if value is None:
            return bool(self.config.get("unclean.leader.election.enable"))
        return str(value).lower() == "true"

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{h}:{p}" for h, p in (b.advertised_address() for b in self.brokers.values() if b.started))
