"""A cluster's transaction markers, sent by the transaction coordinator to partition leaders.

The coordinator groups a transaction's partitions by their current leader (as the controller
records it) and sends each leader one ``WriteTxnMarkers`` request over the Kafka protocol, its own
broker included, as Kafka's ``TransactionMarkerChannelManager`` does; the leader appends the
markers and answers once its in-sync replicas have them
(:class:`~minikafka.broker.transactions.markers.LocalMarkers`). A partition with no live leader,
an unreachable leader or one that has just lost the partition gives a retriable error, and the
coordinator sends that partition's marker again to whoever leads it then. Going over the wire
means fault rules and isolation apply to markers too.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kafka.protocol.producer import WriteTxnMarkersRequest

from minikafka.broker.cluster.partition_state import NO_LEADER
from minikafka.broker.cluster.peer_client import PeerClient, PeerUnavailable
from minikafka.broker.transactions.markers import TxnMarker
from minikafka.errors import ErrorCode
from minikafka.storage.disk_format import TopicPartition

if TYPE_CHECKING:
    from minikafka.broker.cluster.cluster import ClusterLink

#: The WriteTxnMarkers version brokers send each other (flexible; v2 adds the transaction version
#: of KIP-890 part 2, which minikafka does not serve).
MARKERS_VERSION = 1


class PeerMarkers:
    """The markers of one broker's transaction coordinator, sent to partition leaders."""

    def __init__(self, link: ClusterLink, timeout_s: float) -> None:
        """``timeout_s``: how long a leader may take to answer (it waits for its ISR first)."""
        self._link = link
        self._timeout_s = timeout_s
        self._clients: dict[int, PeerClient] = {}

    async def write(self, marker: TxnMarker, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        controller = self._link.controller
        errors: dict[TopicPartition, int] = {}
        by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
        for tp in partitions:
            part = controller.partition(*tp)
            if part is None:  # deleted: Kafka drops the partition from the pending markers too
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif part.leader == NO_LEADER or self._link.peer_address_of(part.leader) is None:
                errors[tp] = ErrorCode.NOT_LEADER_OR_FOLLOWER
            else:
                by_leader[part.leader].append(tp)
        answers = await asyncio.gather(*(self._send(node, marker, tps) for node, tps in by_leader.items()))
        for answer in answers:
            errors.update(answer)
        return errors

    async def _send(self, node: int, marker: TxnMarker, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """One WriteTxnMarkers request to broker ``node``; each partition's error in its answer
        (REQUEST_TIMED_OUT for all when there is no answer)."""
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, partition in partitions:
            by_topic[topic].append(partition)
        Request = WriteTxnMarkersRequest[MARKERS_VERSION]
        Marker = Request.WritableTxnMarker
        request = Request(markers=[Marker(
            producer_id=marker.producer_id, producer_epoch=marker.producer_epoch,
            transaction_result=marker.commit, coordinator_epoch=marker.coordinator_epoch,
            topics=[Marker.WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()])])
        errors: dict[TopicPartition, int] = dict.fromkeys(partitions, ErrorCode.REQUEST_TIMED_OUT)
        client = self._client(node)
        if client is None:
            return dict.fromkeys(partitions, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        try:
            response = await client.request(request, self._timeout_s)
        except (PeerUnavailable, TimeoutError):
            return errors
        for result in response.markers:
            for topic in result.topics:
                for answer in topic.partitions:
                    tp = (topic.name, answer.partition_index)
                    if tp in errors:
                        errors[tp] = answer.error_code
        return errors

    def _client(self, node: int) -> PeerClient | None:
        """The connection to broker ``node``, made anew when it moved (a restart on another port)."""
        address = self._link.peer_address_of(node)
        if address is None:
            return None
        client = self._clients.get(node)
        if client is None or (client.host, client.port) != address:
            client = self._clients[node] = PeerClient(address[0], address[1],
                                                      f"minikafka-txn-markers-{self._link.node_id}")
        return client

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()
