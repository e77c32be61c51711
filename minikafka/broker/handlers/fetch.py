"""Fetch (key 1): whole batches from the fetch offset, with min_bytes/max_wait long-polling.

The response holds whole batches starting with the one that contains the fetch offset; the
client skips records before its offset. ``max_bytes`` and ``partition_max_bytes`` are soft
limits in Kafka's sense: the first batch of the response is returned whole even if larger.

Fetch sessions (KIP-227): minikafka opens none. A full request (session epoch 0 or -1) is answered
with session id 0, which every client takes as "send full fetch requests", as Kafka answers when it
has no free session slot; an incremental one (any other epoch) names a session minikafka does not
have and is answered FETCH_SESSION_ID_NOT_FOUND with no partitions, as Kafka's ``FetchManager``
answers an unknown session, which it checks before FETCH_SESSION_TOPIC_ID_ERROR (a session that
switches between names and ids), so that error never arises here.

v13+ names topics by topic id (KIP-516), answering by id only. An id the broker does not know is
UNKNOWN_TOPIC_ID on each of its partitions, listed after the partitions read, as Kafka lists the
partitions it refused before reading; a topic deleted and created anew under its name while the
fetch waits is INCONSISTENT_TOPIC_ID (the log's id is no longer the request's). v15+ carries the
follower's id in the tagged ``ReplicaState`` (KIP-903; the replica epoch is not checked), v16+
answers NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH with the current leader and its endpoint
(KIP-951), v17 adds the follower's directory id (KIP-853), which a broker with one log directory
ignores. Kafka: ``KafkaApis.handleFetchRequest``,
https://github.com/apache/kafka/blob/trunk/core/src/main/scala/kafka/server/KafkaApis.scala, and
``FetchManager.newContext``, https://github.com/apache/kafka/blob/trunk/core/src/main/scala/kafka/server/FetchSession.scala.

read_committed fetches (isolation level 1, v4+) stop at the last stable offset, which every v4+
response reports whatever the isolation level, and list the aborted transactions overlapping
what they return (clients drop those records themselves); read_uncommitted answers a null list.
The min_bytes wait counts only what is readable at the request's isolation level
(docs/semantics.md#txn-fetch).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from kafka.protocol.consumer import FetchRequest, FetchResponse

from minikafka.broker.cluster import answers
from minikafka.broker.cluster.replica_manager import ReplicaManager
from minikafka.broker.context import RequestContext
from minikafka.broker.partition_answers import cluster_topics
from minikafka.errors import ErrorCode, KafkaError
from minikafka.protocol.fast import make
from minikafka.storage import legacy

READ_COMMITTED = 1
TOPIC_IDS = 13  # first version naming topics by id
REPLICA_STATE = 15  # first version with the follower's id in ReplicaState
LEADER_HINTS = 16  # first version with KIP-951's current leader and node endpoints
_HINTED = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})
_NO_TOPIC_ID = uuid.UUID(int=0)
_FULL_SESSION_EPOCHS = (0, -1)  # a new session (0) or none (-1): a full request
#: per requested topic: its name (None: an unknown topic id) and, from v13, the id it was asked by
Wanted = list[tuple[str | None, uuid.UUID | None, Any]]


def topic_names(ctx: RequestContext) -> dict[uuid.UUID, str]:
    """Every topic's name by its id: the cluster's topics, as Kafka resolves the ids of a v13+
    request through its metadata cache (the fault rules name topics through it too)."""
    return {info.topic_id: name for name, info in cluster_topics(ctx.services).items()}


def _wanted(ctx: RequestContext, request: Any) -> Wanted:
    """The requested topics by name; from v13 each id resolved when the request arrives."""
    if ctx.api_version < TOPIC_IDS:
        return [(t.topic, None, t) for t in request.topics]
    names = topic_names(ctx)
    # kafka-python reads the zero id (no topic) as None
    return [(names.get(t.topic_id), t.topic_id or _NO_TOPIC_ID, t) for t in request.topics]


def replica_id_of(version: int, request: Any) -> int:
    """The follower's broker id, or -1 for a consumer (Kafka's ``FetchRequest.replicaId``); the
    fault rules' ``from_broker`` reads it too."""
    if version < REPLICA_STATE:
        return getattr(request, "replica_id", -1)
    state = request.replica_state
    return -1 if state is None else state.replica_id


def _read_all(ctx: RequestContext, request: Any, wanted: Wanted, replica_id: int
              ) -> tuple[list[tuple[str, uuid.UUID | None, list[dict[str, Any]]]], int]:
    logs = ctx.services.storage
    replicas = ctx.services.replicas
    committed = (ctx.api_version >= 4 and request.isolation_level == READ_COMMITTED and replica_id < 0)
    remaining = request.max_bytes if ctx.api_version >= 3 else 0x7FFFFFFF
    local = logs.topics() if ctx.api_version >= TOPIC_IDS else None
    total = 0
    first = True
    out = []
    for name, topic_id, topic in wanted:
        if name is None:
            continue
        # deleted and created anew under its name since the id was resolved (while the fetch waited)
        info = local.get(name) if local is not None else None
        recreated = info is not None and info.topic_id != topic_id
        parts = []
        for part in topic.partitions:
            entry: dict[str, Any] = {
                "partition_index": part.partition,
                "error_code": ErrorCode.NONE,
                "high_watermark": -1,
                "last_stable_offset": -1,
                "log_start_offset": -1,
                "aborted_transactions": None,
                "records": b"",
            }
            partition_log = logs.get_log(name, part.partition)
            if recreated and partition_log is not None:  # Kafka: ReplicaManager.readFromLog
                entry["error_code"] = ErrorCode.INCONSISTENT_TOPIC_ID
                partition_log = None
            elif replicas is not None:
                error = _replica_check(ctx, replicas, name, part, replica_id, entry)
                if error != ErrorCode.NONE:
                    entry["error_code"] = error
                    partition_log = None
            if partition_log is None:
                if not entry["error_code"]:
                    entry["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                entry["high_watermark"] = partition_log.high_watermark
                lso = partition_log.last_stable_offset
                entry["last_stable_offset"] = lso
                entry["log_start_offset"] = partition_log.log_start_offset
                if "diverging_epoch" in entry:  # a follower that must truncate first: no records
                    parts.append(entry)
                    continue
                limit = min(part.partition_max_bytes, remaining)
                max_offset = lso if committed else (
                    partition_log.high_watermark if partition_log.replicated and replica_id < 0 else None)
                try:
                    if limit > 0 or first:
                        data = partition_log.read(part.fetch_offset, max(limit, 0), first, max_offset)
                        if ctx.api_version <= 3:  # message format v0/v1 (minikafka.storage.legacy)
                            data = legacy.read_down_converted(partition_log, data, ctx.api_version,
                                                              part.fetch_offset, max(limit, 0), first)
                    else:
                        data = b""
                    if committed:
                        aborted = partition_log.aborted_transactions_for_read(
                            part.fetch_offset, max(limit, 0), first, max_offset)
                        entry["aborted_transactions"] = [
                            {"producer_id": pid, "first_offset": offset} for pid, offset in aborted]
                except KafkaError as exc:
                    # Kafka answers a partition it could not read with every offset unknown
                    # (ReplicaManager.createLogReadResult), not the offsets it looked up first.
                    entry.update(error_code=exc.code, high_watermark=-1, last_stable_offset=-1, log_start_offset=-1)
                    data = b""
                if data:
                    first = False
                    remaining -= len(data)
                    total += len(data)
                entry["records"] = data
            parts.append(entry)
        out.append((name, topic_id, parts))
    return out, total


def _unknown_ids(wanted: Wanted) -> list[tuple[str, uuid.UUID | None, list[dict[str, Any]]]]:
    """UNKNOWN_TOPIC_ID for each partition of a topic id the cluster does not know (v13+)."""
    return [("", topic_id, [{"partition_index": part.partition, "error_code": ErrorCode.UNKNOWN_TOPIC_ID,
                             "high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1,
                             "aborted_transactions": None, "records": b""} for part in topic.partitions])
            for name, topic_id, topic in wanted if name is None]


def _replica_check(ctx: RequestContext, replicas: ReplicaManager, topic: str, part: Any, replica_id: int,
                   entry: dict[str, Any]) -> ErrorCode:
    """A cluster broker's checks before reading, in Kafka's order: the request's leader epoch; the
    leader only, for followers and for consumers before v11 (from v11 any replica serves a
    consumer up to its own high watermark); for a follower, a log that diverged (``entry`` gets its
    ``diverging_epoch``: no records) or else its progress noted."""
    version = ctx.api_version
    epoch = part.current_leader_epoch if version >= 9 else -1
    if replica_id >= 0 or version <= 10:
        error = replicas.leader_error(topic, part.partition, epoch)
    else:
        error = replicas.epoch_error(topic, part.partition, epoch)
    if error != ErrorCode.NONE or replica_id < 0:
        return error
    if version >= 12:
        diverging = replicas.diverging_epoch(topic, part.partition, part.last_fetched_epoch, part.fetch_offset)
        if diverging is not None:
            entry["diverging_epoch"] = diverging
            return ErrorCode.NONE
    return replicas.follower_fetched(topic, part.partition, replica_id, part.fetch_offset,
                                     part.log_start_offset if version >= 5 else -1)


async def handle(ctx: RequestContext, request: FetchRequest) -> FetchResponse:
    version = ctx.api_version
    services = ctx.services
    Response = FetchResponse[version]
    if version >= 7 and request.session_epoch not in _FULL_SESSION_EPOCHS:
        return Response(throttle_time_ms=0, error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0,
                        responses=[])
    deadline = time.monotonic() + max(request.max_wait_ms, 0) / 1000
    wanted = _wanted(ctx, request)
    replica_id = replica_id_of(version, request)
    keys = [(name, p.partition) for name, _id, t in wanted if name is not None for p in t.partitions]
    refused = _unknown_ids(wanted) if version >= TOPIC_IDS else []
    while True:
        results, total = _read_all(ctx, request, wanted, replica_id)
        errors = any(p["error_code"] or "diverging_epoch" in p for _, _, parts in results for p in parts)
        left = deadline - time.monotonic()
        if (total >= max(request.min_bytes, 1) or errors or left <= 0 or not services.running()
                or (refused and not keys)):
            break
        await services.fetch_waiters.wait(keys, left)

    Topic = Response.FetchableTopicResponse
    Partition = Topic.PartitionData
    topics_out = []
    hinted = []
    for name, topic_id, parts in results + refused:
        partitions = []
        for p in parts:
            if p["aborted_transactions"] is not None:
                p["aborted_transactions"] = [make(Partition.AbortedTransaction, **a) for a in p["aborted_transactions"]]
            if version >= 11:
                p["preferred_read_replica"] = -1
            diverging = p.pop("diverging_epoch", None)
            if diverging is not None:
                p["diverging_epoch"] = make(Partition.EpochEndOffset, epoch=diverging[0], end_offset=diverging[1])
            answer = make(Partition, **p)
            if p["error_code"] in _HINTED:
                hinted.append((name, p["partition_index"], answer))
            partitions.append(answer)
        if version >= TOPIC_IDS:
            topics_out.append(make(Topic, topic_id=topic_id, partitions=partitions))
        else:
            topics_out.append(make(Topic, topic=name, partitions=partitions))
    fields: dict[str, Any] = {"throttle_time_ms": 0, "responses": topics_out}
    if version >= 7:
        fields["error_code"] = 0
        fields["session_id"] = 0
    response = make(Response, **fields)
    if hinted and version >= LEADER_HINTS and services.cluster is not None:
        answers.add_leader_hints(services.cluster, response, hinted, _HINTED, Partition.LeaderIdAndEpoch,
                                 Response.NodeEndpoint)
    return response
