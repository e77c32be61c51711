"""Followers copy their leaders' logs: one fetch loop per leader broker, over the Kafka protocol.

Each loop sends Fetch v12 with this broker's id as ``replica_id``, for every partition it follows
from that leader: its log end as the fetch offset, the epoch of its last batch as
``last_fetched_epoch``, the leader epoch it knows as ``current_leader_epoch``. The answer's batches
are appended with the leader's offsets and epochs, the high watermark becomes min(leader's, own log
end), and the log start moves up to the leader's (as in Kafka's
``ReplicaFetcherThread.processPartitionData``). A ``diverging_epoch`` answer means the follower's
tail was never the leader's: it truncates as Kafka's follower does
(``AbstractFetcherThread.getOffsetTruncationState``) and fetches again. Errors back off
``replica.fetch.backoff.ms``, cut short when the loop is given a partition or a new leader epoch;
FENCED_LEADER_EPOCH waits for the controller's next word.

OFFSET_OUT_OF_RANGE means the follower's log end is outside the leader's log. The follower asks
the leader for its log end (ListOffsets as a replica: the log end offset, not the high watermark):
if that is below its own, it truncates to it; otherwise it asks for the leader's log start, and if
its own log ends below that (records deleted on the leader by DeleteRecords or retention while the
follower was away), it empties its log and starts it at the leader's log start. Kafka:
``AbstractFetcherThread.handleOutOfRangeError`` / ``fetchOffsetAndTruncate``,
https://github.com/apache/kafka/blob/trunk/core/src/main/scala/kafka/server/AbstractFetcherThread.scala.

The answers are decoded by :mod:`minikafka.protocol.replica_fetch`, and each partition's records
are appended from the buffer the answer was received into.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from kafka.protocol.consumer import ListOffsetsRequest

from minikafka.broker.cluster.peer_client import PeerClient, PeerUnavailable
from minikafka.errors import ErrorCode, KafkaError
from minikafka.protocol.replica_fetch import (
    FetchAnswer,
    FetchPosition,
    PartitionAnswer,
    decode_fetch_answer,
    encode_fetch_request,
)
from minikafka.storage.disk_format import TopicPartition

if TYPE_CHECKING:
    from minikafka.config import BrokerConfig
    from minikafka.storage.log import PartitionLog
    from minikafka.storage.log_manager import LogManager

log = logging.getLogger(__name__)

LIST_OFFSETS_VERSION = 4
#: how long stop() waits for the cancelled fetch loops to end
STOP_TIMEOUT_S = 5.0
LATEST, EARLIEST = -1, -2


@dataclass
class _Followed:
    leader: int
    leader_epoch: int
    fenced: bool = False  # FENCED_LEADER_EPOCH: wait for the controller
    out_of_range: bool = False  # OFFSET_OUT_OF_RANGE: ask the leader where its log ends first


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
        changed = current is None or (current.leader, current.leader_epoch) != (leader, leader_epoch)
        if changed:
            # An ISR change keeps the same leader and epoch: an answer in flight still counts.
            # (A new object here discarded it, and a follower whose every fetch changes the ISR,
            # joining it or leaving it, never appended anything.)
            self.followed[tp] = _Followed(leader, leader_epoch)
        if leader not in self._loops or self._loops[leader].done():
            self._wake[leader] = asyncio.Event()
            self._loops[leader] = asyncio.create_task(self._run(leader), name=f"replica-fetcher-{leader}")
        if changed:  # also cuts a back-off short: the loop may have been waiting out an earlier failure
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
        loops = list(self._loops.values())
        for task in loops:
            task.cancel()
        if loops:
            done, pending = await asyncio.wait(loops, timeout=STOP_TIMEOUT_S)
            for task in done:
                if not task.cancelled() and task.exception() is not None:
                    log.error("node %d: %s failed: %r", self.node_id, task.get_name(), task.exception())
            for task in pending:  # bounded: a stop never hangs on a loop; say which one held out
                log.warning("node %d: %s did not end within %.0f s of its cancellation", self.node_id,
                            task.get_name(), STOP_TIMEOUT_S)
        self._loops.clear()

    # ----------------------------------------------------------------- one leader's loop
    async def _run(self, leader: int) -> None:
        backoff = int(self.config.get("replica.fetch.backoff.ms")) / 1000
        max_wait_ms = int(self.config.get("replica.fetch.wait.max.ms"))
        client: PeerClient | None = None
        try:
            while not self._stopped:
                wake = self._wake[leader]
                wake.clear()  # a follow() from here on ends the waits below at once
                parts = {tp: f for tp, f in self.followed.items() if f.leader == leader and not f.fenced}
                if not parts:
                    await wake.wait()
                    continue
                address = self.address_of(leader)
                if address is None:
                    await self._back_off(wake, backoff)
                    continue
                if client is None or (client.host, client.port) != address:
                    if client is not None:
                        await client.close()
                    client = PeerClient(address[0], address[1], f"replica-fetcher-{self.node_id}")
                try:
                    if any(f.out_of_range for f in parts.values()):
                        progressed = await self._reset_out_of_range(client, parts)
                    else:
                        request = self._request(parts, max_wait_ms, client.client_id)
                        # no name keeps the answer past this line: its records are views of the peer
                        # connection's frame buffer, which the next large answer reuses only if free
                        progressed = self._handle(parts, await client.send(request, decode_fetch_answer,
                                                                           max_wait_ms / 1000 + 10))
                except (PeerUnavailable, TimeoutError) as exc:
                    log.debug("node %d: fetch from leader %d failed: %s", self.node_id, leader, exc)
                    progressed = False
                if not progressed:
                    await self._back_off(wake, backoff)
        finally:
            if client is not None:
                await client.close()

    @staticmethod
    async def _back_off(wake: asyncio.Event, seconds: float) -> None:
        """``replica.fetch.backoff.ms`` after a failed round, cut short when the loop is given a
        partition or a new leader epoch (Kafka's fetcher thread backs off on a condition that
        adding partitions signals). A follower whose fetch failed as its leader crashed fetches
        from the next leader at once, not after the rest of its back-off."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), seconds)

    def _request(self, parts: dict[TopicPartition, _Followed], max_wait_ms: int,
                 client_id: str) -> Callable[[int], bytes]:
        """The Fetch for ``parts``, as a function of its correlation id."""
        by_topic: dict[str, list[FetchPosition]] = {}
        max_bytes = int(self.config.get("replica.fetch.max.bytes"))
        for (topic, partition), followed in parts.items():
            plog = self.storage.get_log(topic, partition)
            if plog is None:
                continue
            by_topic.setdefault(topic, []).append(FetchPosition(
                partition, followed.leader_epoch, plog.log_end_offset, plog.epochs.latest_epoch,
                plog.log_start_offset, max_bytes))
        response_max_bytes = int(self.config.get("replica.fetch.response.max.bytes"))
        return partial(encode_fetch_request, client_id=client_id, replica_id=self.node_id, max_wait_ms=max_wait_ms,
                       max_bytes=response_max_bytes, topics=by_topic)

    def _handle(self, parts: dict[TopicPartition, _Followed], response: FetchAnswer) -> bool:
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

    def _apply(self, tp: TopicPartition, followed: _Followed, plog: PartitionLog, p: PartitionAnswer) -> bool:
        error = ErrorCode(p.error_code)
        if error == ErrorCode.FENCED_LEADER_EPOCH:
            followed.fenced = True  # the leader is newer than what we were told: wait for the controller
            return False
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            followed.out_of_range = True
            return True  # the next round asks the leader where its log is
        if error != ErrorCode.NONE:
            log.debug("node %d: %s-%d: fetch answered %s", self.node_id, tp[0], tp[1], error.name)
            return False
        diverging = p.diverging_epoch
        if diverging is not None and diverging.end_offset >= 0:
            target = truncation_offset(plog, diverging.epoch, diverging.end_offset)
            log.info("node %d: %s-%d diverged from leader %d (its epoch %d ends at %d): truncating to %d",
                     self.node_id, tp[0], tp[1], followed.leader, diverging.epoch, diverging.end_offset, target)
            plog.truncate_to(target)
            return True
        if p.records:
            plog.append_as_follower(p.records)
        plog.update_high_watermark(min(p.high_watermark, plog.log_end_offset))
        if plog.log_start_offset < p.log_start_offset <= plog.high_watermark:
            plog.delete_records(p.log_start_offset)  # records deleted on the leader (DeleteRecords, retention)
        return True

    # ----------------------------------------------------------------- out of range
    async def _reset_out_of_range(self, client: PeerClient, parts: dict[TopicPartition, _Followed]) -> bool:
        """Bring every out-of-range partition back inside the leader's log (see the module
        docstring); False when the leader could not say where its log is for any of them."""
        progressed = False
        for tp, followed in parts.items():
            plog = self.storage.get_log(*tp)
            if not followed.out_of_range or plog is None:
                continue
            leader_end = await self._leader_offset(client, tp, followed, LATEST)
            if leader_end is None or self.followed.get(tp) is not followed:
                continue
            if leader_end < plog.log_end_offset:
                log.warning("node %d: %s-%d: leader %d's log ends at %d, below this replica's end %d: truncating",
                            self.node_id, tp[0], tp[1], followed.leader, leader_end, plog.log_end_offset)
                plog.truncate_to(leader_end)
            else:
                leader_start = await self._leader_offset(client, tp, followed, EARLIEST)
                if leader_start is None or self.followed.get(tp) is not followed:
                    continue
                if leader_start > plog.log_end_offset:
                    log.warning("node %d: %s-%d: leader %d's log starts at %d, past this replica's end %d: "
                                "starting the log afresh there", self.node_id, tp[0], tp[1], followed.leader,
                                leader_start, plog.log_end_offset)
                    plog.truncate_to(leader_start, fully=True)
            followed.out_of_range = False
            progressed = True
        return progressed

    async def _leader_offset(self, client: PeerClient, tp: TopicPartition, followed: _Followed,
                             timestamp: int) -> int | None:
        """The leader's log end (LATEST) or start (EARLIEST), asked as a replica; None on an error."""
        Request = ListOffsetsRequest[LIST_OFFSETS_VERSION]
        Topic = Request.ListOffsetsTopic
        request = Request(replica_id=self.node_id, isolation_level=0, topics=[Topic(name=tp[0], partitions=[
            Topic.ListOffsetsPartition(partition_index=tp[1], current_leader_epoch=followed.leader_epoch,
                                       timestamp=timestamp)])])
        response = await client.request(request, 30)
        answer = response.topics[0].partitions[0]
        error = ErrorCode(answer.error_code)
        if error == ErrorCode.FENCED_LEADER_EPOCH:
            followed.fenced = True
        if error != ErrorCode.NONE:
            log.debug("node %d: %s-%d: ListOffsets answered %s", self.node_id, tp[0], tp[1], error.name)
            return None
        return int(answer.offset)
