"""One broker's replicas in a cluster: what it leads, what it follows, and the high watermark.

The controller tells every broker of every partition change (:meth:`ReplicaManager.apply`). A
broker that becomes leader at a new epoch records where the epoch starts in its log's epoch cache,
forgets what it knew of its followers and stamps the new epoch on what it appends; a broker that
becomes a follower fetches from the new leader (:mod:`.fetcher`), which may first make it truncate
its log. On the leader, each follower's Fetch says how far its log reaches; the high watermark
follows the slowest replica that counts (:mod:`.replica_tracking`), acks=all answers wait for it,
and consumers read up to it. ISR changes go to the controller as Kafka's AlterPartition does.

Kafka: ``ReplicaManager`` and ``Partition`` (makeLeader, makeFollower, updateFollowerFetchState,
maybeShrinkIsr, maybeExpandIsr), https://github.com/apache/kafka/blob/trunk/core/src/main/scala/kafka/server/ReplicaManager.scala.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from minikafka.broker.cluster.controller import Controller, PartitionChange
from minikafka.broker.cluster.partition_state import BrokerState, PartitionRegistration
from minikafka.broker.cluster.replica_tracking import LeaderReplicas
from minikafka.errors import ErrorCode, KafkaError
from minikafka.storage.disk_format import TopicPartition

if TYPE_CHECKING:
    from minikafka.broker.cluster.fetcher import Fetchers
    from minikafka.config import BrokerConfig
    from minikafka.storage.log import PartitionLog
    from minikafka.storage.log_manager import LogManager

log = logging.getLogger(__name__)


#: What the broker is told when it starts leading a partition (topic, partition, leader epoch)
#: or stops (epoch None): its coordinators load and unload their internal partitions on it.
LeadershipListener = Callable[[str, int, "int | None"], None]


class ReplicaManager:
    """The replicas of one broker (see the module docstring)."""

    def __init__(self, node_id: int, controller: Controller, storage: LogManager, config: BrokerConfig,
                 clock: Callable[[], int], fetchers: Fetchers, notify: Callable[[PartitionLog], None],
                 on_leadership: LeadershipListener = lambda topic, partition, epoch: None,
                 controller_reachable: Callable[[], bool] = lambda: True) -> None:
        self.node_id = node_id
        self._controller_reachable = controller_reachable
        self._on_leadership = on_leadership
        self._internal_write_timeout_s = int(config.get("offsets.commit.timeout.ms")) / 1000
        self.controller = controller
        self.storage = storage
        self.config = config
        self.clock = clock
        self.fetchers = fetchers
        self._notify = notify  # wakes fetches waiting for data: the high watermark moved
        self.leading: dict[TopicPartition, LeaderReplicas] = {}
        self._hw_waiters: dict[TopicPartition, list[tuple[int, asyncio.Future[ErrorCode]]]] = {}
        self._expiration: asyncio.Task[None] | None = None

    # ----------------------------------------------------------------- lifecycle
    def start(self) -> None:
        """Take up every replica this broker has, as the controller records them now, after
        dropping the leftovers of topics deleted while it was down."""
        self.catch_up()
        self._expiration = asyncio.create_task(self._expire_isr_members())

    async def stop(self) -> None:
        if self._expiration is not None:
            self._expiration.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._expiration
        await self.fetchers.stop()
        for tp in list(self._hw_waiters):
            self._fail_waiters(tp, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        self.leading.clear()

    def catch_up(self) -> None:
        """The broker reaches the controller again after a cut (``Cluster.reconnect_controller``):
        take up what changed meanwhile, as :meth:`start` does, a leader's unsent ISR change
        included (the controller's record replaces it; the leader asks again if it still must),
        and the topic configs changed meanwhile."""
        self._drop_deleted_topics()
        for name in list(self.storage.topics()):
            self.topic_configs_changed(name)
        for (topic, partition), part in list(self.controller.partitions.items()):
            if self.node_id in part.replicas:
                self._take_up(topic, partition, part)

    def _drop_deleted_topics(self) -> None:
        """Local topics the controller no longer has, or has again under another topic id (deleted
        and created anew), are deleted, as Kafka's broker deletes its stray logs at start-up."""
        for name, info in list(self.storage.topics().items()):
            record = self.controller.topics.get(name)
            if record is not None and record.topic_id == info.topic_id:
                continue
            log.info("node %d: topic %s was deleted while the broker was down or cut off; deleting its replicas",
                     self.node_id, name)
            self.forget_topic(name)

    def forget_topic(self, name: str) -> None:
        """The topic was deleted: stop leading and following its partitions, answer the acks=all
        writes waiting on them with UNKNOWN_TOPIC_OR_PARTITION, and delete the replicas here."""
        for tp in {*self.leading, *self.fetchers.followed, *self._hw_waiters}:
            if tp[0] == name:
                self.fetchers.remove(tp)
                self.leading.pop(tp, None)
                self._fail_waiters(tp, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if name in self.storage.topics():
            self.storage.delete_topic(name)

    # ----------------------------------------------------------------- controller changes
    def topic_configs_changed(self, name: str) -> None:
        """Take up the topic's overrides as the controller records them (after AlterConfigs, or at
        start-up for changes made while this broker was down): its replicas here get them, and the
        partitions it leads their ``min.insync.replicas``, as every Kafka broker applies a topic's
        ConfigRecord to the logs it has."""
        record = self.controller.topics.get(name)
        info = self.storage.topics().get(name)
        if record is None or info is None:
            return
        if {k: str(v) for k, v in info.configs.items()} != record.configs:
            self.storage.alter_topic_configs(name, dict(record.configs))
        for tp, replicas in list(self.leading.items()):
            plog = self.storage.get_log(*tp)
            if tp[0] == name and plog is not None:
                replicas.min_insync_replicas = int(plog.config.get("min.insync.replicas", 1))
                self._advance(tp, plog)

    def apply(self, change: PartitionChange) -> None:
        if self.node_id in change.after.replicas:
            self._take_up(change.topic, change.partition, change.after)

    def _take_up(self, topic: str, partition: int, part: PartitionRegistration) -> None:
        plog = self._local_log(topic, partition)
        if plog is None:
            return
        tp = (topic, partition)
        if part.leader == self.node_id:
            self._lead(tp, plog, part)
        else:
            self._follow(tp, plog, part)

    def _local_log(self, topic: str, partition: int) -> PartitionLog | None:
        """This broker's replica of the partition, created the first time it is needed."""
        plog = self.storage.get_log(topic, partition)
        if plog is not None:
            return plog
        record = self.controller.topics.get(topic)
        if record is None:
            return None
        hosted = [p for p in range(record.partitions) if self.node_id in self.controller.partitions[(topic, p)].replicas]
        info = self.storage.topics().get(topic)
        if info is None:
            self.storage.create_topic(topic, record.partitions, dict(record.configs), topic_id=record.topic_id,
                                      hosted=hosted)
        elif info.partitions < record.partitions:
            self.storage.add_partitions(topic, record.partitions, [p for p in hosted if p >= info.partitions])
        plog = self.storage.get_log(topic, partition)
        if plog is not None:
            plog.replicated = True
        return plog

    def _lead(self, tp: TopicPartition, plog: PartitionLog, part: PartitionRegistration) -> None:
        current = self.leading.get(tp)
        if current is not None and plog.leader_epoch == part.leader_epoch:
            current.confirmed(part.isr)  # an ISR change only
            self._advance(tp, plog)
            return
        self._on_leadership(tp[0], tp[1], part.leader_epoch)
        self.fetchers.remove(tp)
        plog.replicated = True
        plog.leader_epoch = part.leader_epoch
        plog.epochs.assign(part.leader_epoch, plog.log_end_offset)
        self.leading[tp] = LeaderReplicas(
            self.node_id, part.replicas, part.isr, leader_log_end_offset=plog.log_end_offset,
            high_watermark=plog.high_watermark, now_ms=self.clock(),
            lag_time_max_ms=int(self.config.get("replica.lag.time.max.ms")),
            min_insync_replicas=int(plog.config.get("min.insync.replicas", 1)))
        log.info("node %d leads %s-%d at epoch %d (ISR %s, log end %d)", self.node_id, tp[0], tp[1],
                 part.leader_epoch, list(part.isr), plog.log_end_offset)
        self._advance(tp, plog)

    def _follow(self, tp: TopicPartition, plog: PartitionLog, part: PartitionRegistration) -> None:
        if self.leading.pop(tp, None) is not None:
            self._on_leadership(tp[0], tp[1], None)
            self._fail_waiters(tp, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            log.info("node %d follows %s-%d at epoch %d (leader %d)", self.node_id, tp[0], tp[1],
                     part.leader_epoch, part.leader)
        plog.replicated = True
        plog.leader_epoch = part.leader_epoch
        self.fetchers.follow(tp, part.leader, part.leader_epoch)

    # ----------------------------------------------------------------- questions handlers ask
    def registration(self, topic: str, partition: int) -> PartitionRegistration | None:
        return self.controller.partition(topic, partition)

    def epoch_error(self, topic: str, partition: int, current_leader_epoch: int) -> ErrorCode:
        """Kafka's check of a request's ``current_leader_epoch`` against this broker's: lower is
        FENCED_LEADER_EPOCH, higher UNKNOWN_LEADER_EPOCH; -1 skips it."""
        plog = self.storage.get_log(topic, partition)
        if plog is None:
            return self.not_here(topic, partition)
        if current_leader_epoch < 0 or current_leader_epoch == plog.leader_epoch:
            return ErrorCode.NONE
        return (ErrorCode.FENCED_LEADER_EPOCH if current_leader_epoch < plog.leader_epoch
                else ErrorCode.UNKNOWN_LEADER_EPOCH)

    def leader_error(self, topic: str, partition: int, current_leader_epoch: int = -1) -> ErrorCode:
        """NONE when this broker leads the partition at the request's epoch, else Kafka's error."""
        error = self.epoch_error(topic, partition, current_leader_epoch)
        if error != ErrorCode.NONE:
            return error
        if (topic, partition) not in self.leading:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.NONE

    def not_here(self, topic: str, partition: int) -> ErrorCode:
        """A partition with no replica here: known to the cluster (6) or not (3)."""
        if self.controller.partition(topic, partition) is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return ErrorCode.NOT_LEADER_OR_FOLLOWER

    def below_min_isr(self, topic: str, partition: int) -> bool:
        replicas = self.leading.get((topic, partition))
        return replicas is not None and replicas.below_min_isr()

    # ----------------------------------------------------------------- coordinators' writes
    def check_writable(self, topic: str, partition: int) -> None:
        """Raise unless a coordinator of this broker may append to the partition: it leads it
        (NOT_LEADER_OR_FOLLOWER) and its ISR has ``min.insync.replicas`` (NOT_ENOUGH_REPLICAS)."""
        error = self.leader_error(topic, partition)
        if error == ErrorCode.NONE and self.below_min_isr(topic, partition):
            error = ErrorCode.NOT_ENOUGH_REPLICAS
        if error != ErrorCode.NONE:
            raise KafkaError(error, f"{topic}-{partition}: cannot append here ({error.name})")

    async def replicated(self, topic: str, partition: int, offset: int) -> None:
        """Wait until every in-sync replica has the partition up to ``offset``, as Kafka's
        coordinators append with acks=all (for up to ``offsets.commit.timeout.ms``); raise the
        error that ended the wait."""
        error = await self.wait_for_high_watermark(topic, partition, offset, self._internal_write_timeout_s)
        if error != ErrorCode.NONE:
            raise KafkaError(error, f"{topic}-{partition}: offset {offset} not replicated ({error.name})")

    # ----------------------------------------------------------------- acks=all
    async def wait_for_high_watermark(self, topic: str, partition: int, required_offset: int,
                                      timeout_s: float) -> ErrorCode:
        """Wait until the high watermark reaches ``required_offset`` (an acks=all write is in every
        replica that counts): NONE, NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below the
        minimum meanwhile, REQUEST_TIMED_OUT, or NOT_LEADER_OR_FOLLOWER when leadership moved."""
        tp = (topic, partition)
        replicas = self.leading.get(tp)
        if replicas is None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if replicas.high_watermark < required_offset:
            waiter: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
            self._hw_waiters.setdefault(tp, []).append((required_offset, waiter))
            try:
                code = await asyncio.wait_for(waiter, timeout_s)
            except TimeoutError:
                return ErrorCode.REQUEST_TIMED_OUT
            if code != ErrorCode.NONE:
                return code
            replicas = self.leading.get(tp)
            if replicas is None:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.NONE if replicas.acks_all_outcome() else ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND

    def _fail_waiters(self, tp: TopicPartition, code: ErrorCode) -> None:
        for _, waiter in self._hw_waiters.pop(tp, []):
            if not waiter.done():
                waiter.set_result(code)

    # ----------------------------------------------------------------- followers' fetches
    def follower_fetched(self, topic: str, partition: int, replica_id: int, fetch_offset: int,
                         log_start_offset: int) -> ErrorCode:
        """A follower's Fetch reached the leader: note its progress, move the high watermark, and
        ask the controller to take it into the ISR once it has caught up."""
        tp = (topic, partition)
        replicas = self.leading.get(tp)
        plog = self.storage.get_log(topic, partition)
        if replicas is None or plog is None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if replica_id not in replicas.followers:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        replicas.follower_fetched(replica_id, fetch_offset, log_start_offset, plog.log_end_offset, self.clock())
        self._advance(tp, plog)
        joining = replicas.to_add(self._eligible())
        if joining:
            self._alter_isr(tp, replicas, replicas.isr + tuple(joining))
        return ErrorCode.NONE

    def diverging_epoch(self, topic: str, partition: int, last_fetched_epoch: int,
                        fetch_offset: int) -> tuple[int, int] | None:
        """``(epoch, end offset)`` when a follower's log diverged from this leader's: its last epoch
        ends here before its fetch offset, or is unknown here (Kafka: ``Partition.readRecords``)."""
        plog = self.storage.get_log(topic, partition)
        if plog is None or last_fetched_epoch < 0:
            return None
        epoch, end = plog.epochs.end_offset_for(last_fetched_epoch, plog.log_end_offset)
        if epoch < last_fetched_epoch or end < fetch_offset:
            return epoch, end
        return None

    def _advance(self, tp: TopicPartition, plog: PartitionLog) -> None:
        replicas = self.leading.get(tp)
        if replicas is None:
            return
        if replicas.maybe_increment_high_watermark(plog.log_end_offset, self._eligible(), self.clock()):
            plog.update_high_watermark(replicas.high_watermark)
            waiters = self._hw_waiters.get(tp, [])
            ready = [w for w in waiters if w[0] <= replicas.high_watermark]
            if ready:
                self._hw_waiters[tp] = [w for w in waiters if w[0] > replicas.high_watermark]
                for _, waiter in ready:
                    if not waiter.done():
                        waiter.set_result(ErrorCode.NONE)
            self._notify(plog)

    def appended(self, topic: str, partition: int) -> None:
        """The leader appended: with no follower that counts, the high watermark moves at once."""
        plog = self.storage.get_log(topic, partition)
        if plog is not None:
            self._advance((topic, partition), plog)

    def _eligible(self) -> set[int]:
        return {n for n, b in self.controller.brokers.items() if b.state is BrokerState.ACTIVE}

    # ----------------------------------------------------------------- ISR changes
    def _alter_isr(self, tp: TopicPartition, replicas: LeaderReplicas, isr: tuple[int, ...]) -> None:
        part = self.controller.partition(*tp)
        if part is None:
            return
        replicas.pending_isr = isr
        if not self._controller_reachable():
            # Kafka's AlterPartition waits for the controller; the pending ISR holds meanwhile (the
            # high watermark waits for every member of both) and :meth:`catch_up` settles it
            log.info("%s-%d: ISR change to %s waits: the controller is out of reach", tp[0], tp[1], list(isr))
            return
        code, after = self.controller.alter_partition(self.node_id, tp[0], tp[1], part.leader_epoch,
                                                      part.partition_epoch, isr)
        if code != ErrorCode.NONE:
            log.info("%s-%d: ISR change to %s refused: %s", tp[0], tp[1], list(isr), code.name)
            replicas.pending_isr = None
        elif tp in self.leading and after is not None:  # the change came back through apply()
            replicas.confirmed(after.isr)

    async def _expire_isr_members(self) -> None:
        """Every half ``replica.lag.time.max.ms``, drop the ISR followers that are not caught up."""
        while True:
            await asyncio.sleep(max(int(self.config.get("replica.lag.time.max.ms")) / 2000, 0.01))
            now = self.clock()
            for tp, replicas in list(self.leading.items()):
                plog = self.storage.get_log(*tp)
                if plog is None:
                    continue
                leaving = replicas.to_remove(plog.log_end_offset, now)
                if leaving:
                    log.info("%s-%d: followers %s fell behind; leaving the ISR", tp[0], tp[1], leaving)
                    self._alter_isr(tp, replicas, tuple(r for r in replicas.isr if r not in leaving))
                    self._advance(tp, plog)
