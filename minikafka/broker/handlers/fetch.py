"""Fetch (key 1): whole batches from the fetch offset, with min_bytes/max_wait long-polling.

The response holds whole batches starting with the one that contains the fetch offset; the
client skips records before its offset. ``max_bytes`` and ``partition_max_bytes`` are soft
limits in Kafka's sense: the first batch of the response is returned whole even if larger.
minikafka declines incremental fetch sessions (KIP-227) by answering session id 0, which
every client treats as "send full fetch requests".

read_committed fetches (isolation level 1, v4+) stop at the last stable offset, which every v4+
response reports whatever the isolation level, and list the aborted transactions overlapping
what they return (clients drop those records themselves); read_uncommitted answers a null list.
The min_bytes wait counts only what is readable at the request's isolation level
(docs/semantics.md#txn-fetch).
"""

from __future__ import annotations

import time
from typing import Any

from kafka.protocol.consumer import FetchRequest, FetchResponse

from minikafka.broker.cluster.replica_manager import ReplicaManager
from minikafka.broker.context import RequestContext
from minikafka.errors import ErrorCode, KafkaError
from minikafka.storage import legacy

READ_COMMITTED = 1


def _read_all(ctx: RequestContext, request: Any) -> tuple[list[tuple[str, list[dict[str, Any]]]], int]:
    logs = ctx.services.storage
    replicas = ctx.services.replicas
    replica_id = getattr(request, "replica_id", -1)
    committed = (ctx.api_version >= 4 and request.isolation_level == READ_COMMITTED and replica_id < 0)
    remaining = request.max_bytes if ctx.api_version >= 3 else 0x7FFFFFFF
    total = 0
    first = True
    out = []
    for topic in request.topics:
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
            partition_log = logs.get_log(topic.topic, part.partition)
            if replicas is not None:
                error = _replica_check(ctx, replicas, topic.topic, part, replica_id, entry)
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
        out.append((topic.topic, parts))
    return out, total


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
    deadline = time.monotonic() + max(request.max_wait_ms, 0) / 1000
    keys = [(t.topic, p.partition) for t in request.topics for p in t.partitions]
    while True:
        results, total = _read_all(ctx, request)
        errors = any(p["error_code"] or "diverging_epoch" in p for _, parts in results for p in parts)
        left = deadline - time.monotonic()
        if total >= max(request.min_bytes, 1) or errors or left <= 0 or not services.running():
            break
        await services.fetch_waiters.wait(keys, left)

    Response = FetchResponse[version]
    Topic = Response.FetchableTopicResponse
    Partition = Topic.PartitionData
    topics_out = []
    for name, parts in results:
        partitions = []
        for p in parts:
            if p["aborted_transactions"] is not None:
                p["aborted_transactions"] = [Partition.AbortedTransaction(**a) for a in p["aborted_transactions"]]
            if version >= 11:
                p["preferred_read_replica"] = -1
            diverging = p.pop("diverging_epoch", None)
            if diverging is not None:
                p["diverging_epoch"] = Partition.EpochEndOffset(epoch=diverging[0], end_offset=diverging[1])
            partitions.append(Partition(**p))
        topics_out.append(Topic(topic=name, partitions=partitions))
    fields: dict[str, Any] = {"throttle_time_ms": 0, "responses": topics_out}
    if version >= 7:
        fields["error_code"] = 0
        fields["session_id"] = 0
    return Response(**fields)
