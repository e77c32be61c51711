"""ListOffsets (key 2): earliest, latest, max-timestamp and by-timestamp lookups.

From v2 a request carries an isolation level: for read_committed the latest offset is the last
stable offset, and a timestamp lookup that lands at or beyond the readable end (the last stable
offset, resp. the high watermark) answers offset -1, timestamp -1, as Kafka does
(docs/semantics.md#txn-fetch).
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


async def handle(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    version = ctx.api_version
    logs = ctx.services.storage
    Response = ListOffsetsResponse[version]
    Topic = Response.ListOffsetsTopicResponse
    Partition = Topic.ListOffsetsPartitionResponse
    committed = version >= 2 and request.isolation_level == READ_COMMITTED
    replicas = ctx.services.replicas
    only_leader = request.replica_id != DEBUGGING_REPLICA_ID

    def answer(topic: str, part: Any) -> Any:
        partition_log = logs.get_log(topic, part.partition_index)
        error, offset, timestamp = ErrorCode.NONE, -1, -1
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
        elif part.timestamp == LATEST:
            offset = partition_log.last_stable_offset if committed else partition_log.high_watermark
        elif part.timestamp in (EARLIEST, EARLIEST_LOCAL):
            offset = partition_log.log_start_offset
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
        fields: dict[str, Any] = {
            "partition_index": part.partition_index,
            "error_code": error,
            "timestamp": timestamp,
            "offset": offset,
        }
        if version == 0:
            fields["old_style_offsets"] = old_style
        if version >= 4:
            fields["leader_epoch"] = partition_log.leader_epoch if offset >= 0 and partition_log else -1
        return Partition(**fields)

    return Response(throttle_time_ms=0, topics=per_partition(Topic, request.topics, answer))
