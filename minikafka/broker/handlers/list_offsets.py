"""ListOffsets (key 2): earliest, latest, max-timestamp and by-timestamp lookups.

From v2 a request carries an isolation level: for read_committed the latest offset is the last
stable offset, and a timestamp lookup that lands at or beyond the readable end (the last stable
offset, resp. the high watermark) answers offset -1, timestamp -1, as Kafka does
(docs/semantics.md#txn-fetch). A follower (``replica_id`` >= 0) asking for the latest offset is
told the log end offset, which it compares with its own when its fetch was out of range (Kafka
answers a replica without an isolation level: ``UnifiedLog.fetchOffsetByTimestamp``).

From v4 an answer names the leader epoch of the offset it gives: the current epoch for the latest
offset, the first cached epoch for the log start, the epoch of the record found for a timestamp
(Kafka: ``UnifiedLog.fetchOffsetByTimestamp``,
https://github.com/apache/kafka/blob/trunk/core/src/main/scala/kafka/log/UnifiedLog.scala).
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse

from minikafka.broker.context import RequestContext
from minikafka.broker.partition_answers import per_partition
from minikafka.errors import ErrorCode, KafkaError
from minikafka.storage import legacy

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
READ_COMMITTED = 1
#: Kafka's ``ListOffsetsRequest.DEBUGGING_REPLICA_ID``: a tool that may read any replica, not only the leader
DEBUGGING_REPLICA_ID = -2
CONSUMER_REPLICA_ID = -1


def _epoch_start(partition_log: Any) -> int:
    """Where the leader's current epoch starts in its log (its log end when it was elected), -1
    when its epoch cache does not end with that epoch."""
    entries = partition_log.epochs.entries
    if entries and entries[-1].epoch == partition_log.leader_epoch:
        return int(entries[-1].start_offset)
    return -1


async def handle(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    version = ctx.api_version
    logs = ctx.services.storage
    Response = ListOffsetsResponse[version]
    Topic = Response.ListOffsetsTopicResponse
    Partition = Topic.ListOffsetsPartitionResponse
    committed = version >= 2 and request.isolation_level == READ_COMMITTED
    replicas = ctx.services.replicas
    only_leader = request.replica_id != DEBUGGING_REPLICA_ID
    # a new leader whose high watermark has not reached the start of its epoch cannot tell a client
    # where the log ends yet: OFFSET_NOT_AVAILABLE, LEADER_NOT_AVAILABLE before v5
    # (Partition.fetchOffsetForTimestamp, KafkaApis' ListOffsets answer)
    not_available = ErrorCode.OFFSET_NOT_AVAILABLE if version >= 5 else ErrorCode.LEADER_NOT_AVAILABLE
    client = replicas is not None and request.replica_id == CONSUMER_REPLICA_ID

    def lagging(partition_log: Any) -> bool:
        """A client asks a cluster's leader whose high watermark is below the start of its epoch."""
        return client and _epoch_start(partition_log) > partition_log.high_watermark

    def answer(topic: str, part: Any) -> Any:
        partition_log = logs.get_log(topic, part.partition_index)
        error, offset, timestamp, epoch_found = ErrorCode.NONE, -1, -1, -1
        old_style: list[int] = []
        if replicas is not None:  # a cluster: the leader answers, at the request's epoch (v4+)
            epoch = part.current_leader_epoch if version >= 4 else -1
            error = (replicas.leader_error(topic, part.partition_index, epoch) if only_leader
                     else replicas.epoch_error(topic, part.partition_index, epoch))
        if error != ErrorCode.NONE:
            pass
        elif partition_log is None:
            error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif version == 0:  # segment start offsets (minikafka.storage.legacy)
            if part.max_num_offsets < 0:
                error = ErrorCode.INVALID_REQUEST
            else:
                old_style = legacy.offsets_before(partition_log, part.timestamp, part.max_num_offsets,
                                                  ctx.services.clock())
        elif part.timestamp == LATEST and request.replica_id >= 0:  # a follower asks where the log ends
            offset, epoch_found = partition_log.log_end_offset, partition_log.leader_epoch
        elif part.timestamp == LATEST:
            if lagging(partition_log):
                error = not_available
            else:
                offset = partition_log.last_stable_offset if committed else partition_log.high_watermark
                epoch_found = partition_log.leader_epoch
        elif part.timestamp in (EARLIEST, EARLIEST_LOCAL):
            offset = partition_log.log_start_offset
            first = partition_log.epochs.entries[:1]
            epoch_found = first[0].epoch if first and first[0].start_offset <= offset else -1
        elif part.timestamp < 0 and part.timestamp != MAX_TIMESTAMP:
            error = ErrorCode.INVALID_REQUEST
        else:
            try:  # these two decode the records of one batch, which may be undecodable
                if part.timestamp == MAX_TIMESTAMP:
                    offset, timestamp = partition_log.max_timestamp_offset()
                else:
                    found = partition_log.offset_for_timestamp(part.timestamp)
                    if found is not None:
                        offset, timestamp = found
            except KafkaError as exc:
                error = exc.code
            readable_end = partition_log.last_stable_offset if committed else partition_log.high_watermark
            if offset >= readable_end:
                offset, timestamp = -1, -1
                if lagging(partition_log):
                    error = not_available
            epoch_found = partition_log.epochs.epoch_for_offset(offset) if offset >= 0 else -1
        fields: dict[str, Any] = {
            "partition_index": part.partition_index,
            "error_code": error,
            "timestamp": timestamp,
            "offset": offset,
        }
        if version == 0:
            fields["old_style_offsets"] = old_style
        if version >= 4:
            fields["leader_epoch"] = epoch_found if offset >= 0 else -1
        return Partition(**fields)

    return Response(throttle_time_ms=0, topics=per_partition(Topic, request.topics, answer))
