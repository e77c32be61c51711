"""Followers copy their leaders' logs: one fetch loop per leader broker, over the Kafka protocol.

Each loop sends Fetch v12 with this broker's id as ``replica_id``, for every partition it follows
from that leader: its log end as the fetch offset, the epoch of its last batch as
``last_fetched_epoch``, the leader epoch it knows as ``current_leader_epoch``. The answer's batches
are appended with the leader's offsets and epochs, the high watermark becomes min(leader's, own log
end). A ``diverging_epoch`` answer means the follower's tail was never the leader's: it truncates as
Kafka's follower does (``AbstractFetcherThread.getOffsetTruncationState``) and fetches again. Errors
back off ``replica.fetch.backoff.ms``; FENCED_LEADER_EPOCH waits for the controller's next word.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafka.protocol.consumer import FetchRequest

from minikafka.broker.cluster.peer_client import PeerClient, PeerUnavailable
from minikafka.errors import ErrorCode, KafkaError
from minikafka.storage.disk_format import TopicPartition

if TYPE_CHECKING:
    from minikafka.config import BrokerConfig
    from minikafka.storage.log import PartitionLog
    from minikafka.storage.log_manager import LogManager

log = logging.getLogger(__name__)

FETCH_VERSION = 12
_RETRIABLE = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_LEADER_EPOCH,
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.OFFSET_OUT_OF_RANGE})


@dataclass
class _Followed:
    leader: int
    leader_epoch: int
    fenced: bool = False  # FENCED_LEADER_EPOCH: wait for the controller


def truncation_offset(plog: PartitionLog, leader_epoch: int, leader_end: int) -> int:
    """Where a follower cuts its log when the leader says its epoch ``leader_epoch`` ends at
    ``leader_end``: where both logs agree, never past the follower's own end."""
    leo = plog.log_end_offset
    if leader_epoch < 0:
        return min(leader_end, leo)
    mine, my_end = plog.epochs.end_offset_for(leader_epoch, leo)
    if mine < 0:  # no epoch of ours at or below the leader's
        return min(leader_end, leo)
    if mine != leader_epoch:  # only a lower epoch: cut where ours ends, then ask again
        return min(my_end, leo)
    return min(leader_end, my_end, leo)


class Fetchers:
    """The fetch loops of one broker, one per leader it follows partitions from."""

    def __init__(self, node_id: int, storage: LogManager, config: BrokerConfig,
                 address_of: Callable[[int], tuple[str, int] | None]) -> None:
        self.node_id = node_id
        self.storage = storage
        self.config = config
        self.address_of = address_of
        self.followed: dict[TopicPartition, _Followed] = {}
        self._loops: dict[int, asyncio.Task[None]] = {}
        self._wake: dict[int, asyncio.Event] = {}
        self._stopped = False

    def follow(self, tp: TopicPartition, leader: int, leader_epoch: int) -> None:
        if leader < 0:
            self.remove(tp)
            return
        current = self.followed.get(tp)
        if current is None or (current.leader, current.leader_epoch) != (leader, leader_epoch):
            # An ISR change keeps the same leader and epoch: an answer in flight still counts.
            # (A new object here discarded it, and a follower whose every fetch changes the ISR,
            # joining it or leaving it, never appended anything.)
            self.followed[tp] = _Followed(leader, leader_epoch)
        if leader not in self._loops or self._loops[leader].done():
            self._wake[leader] = asyncio.Event()
            self._loops[leader] = asyncio.create_task(self._run(leader), name=f"replica-fetcher-{leader}")
        self._wake[leader].set()

    def remove(self, tp: TopicPartition) -> None:
        self.followed.pop(tp, None)

    async def stop(self) -> None:
        # The flag and the wake-up end a loop even if Python 3.11's wait_for dropped its
        # cancellation (an answer that arrived as the cancel did): it would wait for work forever.
        self._stopped = True
        self.followed.clear()
        for wake in self._wake.values():
            wake.set()
        for task in self._loops.values():
            task.cancel()
        for task in self._loops.values():
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._loops.clear()

    # ----------------------------------------------------------------- one leader's loop
    async def _run(self, leader: int) -> None:
        backoff = int(self.config.get("replica.fetch.backoff.ms")) / 1000
        max_wait_ms = int(self.config.get("replica.fetch.wait.max.ms"))
        client: PeerClient | None = None
        try:
            while not self._stopped:
                parts = {tp: f for tp, f in self.followed.items() if f.leader == leader and not f.fenced}
                if not parts:
                    wake = self._wake[leader]
                    wake.clear()
                    await wake.wait()
                    continue
                address = self.address_of(leader)
                if address is None:
                    await asyncio.sleep(backoff)
                    continue
                if client is None or (client.host, client.port) != address:
                    if client is not None:
                        await client.close()
                    client = PeerClient(address[0], address[1], f"replica-fetcher-{self.node_id}")
                try:
                    response = await client.request(self._request(parts, max_wait_ms), max_wait_ms / 1000 + 10)
                except (PeerUnavailable, TimeoutError) as exc:
                    log.debug("node %d: fetch from leader %d failed: %s", self.node_id, leader, exc)
                    await asyncio.sleep(backoff)
                    continue
                if not self._handle(parts, response):
                    await asyncio.sleep(backoff)
        finally:
            if client is not None:
                await client.close()

    def _request(self, parts: dict[TopicPartition, _Followed], max_wait_ms: int) -> Any:
        Request = FetchRequest[FETCH_VERSION]
        Topic = Request.FetchTopic
        by_topic: dict[str, list[Any]] = {}
        max_bytes = int(self.config.get("replica.fetch.max.bytes"))
        for (topic, partition), followed in parts.items():
            plog = self.storage.get_log(topic, partition)
            if plog is None:
                continue
            by_topic.setdefault(topic, []).append(Topic.FetchPartition(
                partition=partition, current_leader_epoch=followed.leader_epoch, fetch_offset=plog.log_end_offset,
                last_fetched_epoch=plog.epochs.latest_epoch, log_start_offset=plog.log_start_offset,
                partition_max_bytes=max_bytes))
        return Request(replica_id=self.node_id, max_wait_ms=max_wait_ms, min_bytes=1,
                       max_bytes=int(self.config.get("replica.fetch.response.max.bytes")), isolation_level=0,
                       session_id=0, session_epoch=-1,
                       topics=[Topic(topic=t, partitions=ps) for t, ps in by_topic.items()],
                       forgotten_topics_data=[], rack_id="")

    def _handle(self, parts: dict[TopicPartition, _Followed], response: Any) -> bool:
        """Apply one answer; False when every partition in it failed (the loop backs off)."""
        progressed = False
        for topic in response.responses:
            for p in topic.partitions:
                tp = (topic.topic, p.partition_index)
                followed = parts.get(tp)
                plog = self.storage.get_log(*tp)
                if followed is None or plog is None or self.followed.get(tp) is not followed:
                    continue  # no longer followed from this leader at this epoch
                try:
                    progressed |= self._apply(tp, followed, plog, p)
                except KafkaError as exc:
                    log.warning("node %d: %s-%d: cannot apply what leader %d sent: %s", self.node_id, tp[0], tp[1],
                                followed.leader, exc)
        return progressed

    def _apply(self, tp: TopicPartition, followed: _Followed, plog: PartitionLog, p: Any) -> bool:
        error = ErrorCode(p.error_code)
        if error == ErrorCode.FENCED_LEADER_EPOCH:
            followed.fenced = True  # the leader is newer than what we were told: wait for the controller
            return False
        if error in _RETRIABLE or error != ErrorCode.NONE:
            log.debug("node %d: %s-%d: fetch answered %s", self.node_id, tp[0], tp[1], error.name)
            return False
        diverging = getattr(p, "diverging_epoch", None)
        if diverging is not None and diverging.end_offset >= 0:
            target = truncation_offset(plog, diverging.epoch, diverging.end_offset)
            log.info("node %d: %s-%d diverged from leader %d (its epoch %d ends at %d): truncating to %d",
                     self.node_id, tp[0], tp[1], followed.leader, diverging.epoch, diverging.end_offset, target)
            plog.truncate_to(target)
            return True
        if p.records:
            plog.append_as_follower(p.records)
        plog.update_high_watermark(min(p.high_watermark, plog.log_end_offset))
        return True
