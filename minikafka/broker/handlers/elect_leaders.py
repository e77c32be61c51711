"""ElectLeaders (key 43): preferred or unclean leader elections, decided by the controller.

Every broker of a cluster takes the request (Kafka's brokers forward it to the controller); the
controller elects by Kafka's rules (:meth:`~minikafka.broker.cluster.controller.Controller.elect_leaders`).
A single broker leads every partition it has and is each one's preferred replica, so every known
partition answers ELECTION_NOT_NEEDED, as a Kafka cluster of one broker does. With
``topic_partitions`` null every partition is tried and those that needed nothing are left out.
Kafka: ``ReplicationControlManager.electLeaders``,
https://github.com/apache/kafka/blob/trunk/metadata/src/main/java/org/apache/kafka/controller/ReplicationControlManager.java.
"""

from __future__ import annotations

from kafka.protocol.admin import ElectLeadersRequest, ElectLeadersResponse

from minikafka.broker.cluster.controller import ElectionType
from minikafka.broker.context import RequestContext
from minikafka.errors import ErrorCode
from minikafka.storage.disk_format import TopicPartition

NOT_NEEDED = "Leader election not needed for topic partition."


def _single_broker(ctx: RequestContext, wanted: list[TopicPartition] | None) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
    topics = ctx.services.storage.topics()
    if wanted is None:
        return {}  # every partition already has its preferred leader
    return {tp: ((ErrorCode.ELECTION_NOT_NEEDED, NOT_NEEDED)
                 if tp[0] in topics and 0 <= tp[1] < topics[tp[0]].partitions
                 else (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."))
            for tp in wanted}


async def handle(ctx: RequestContext, request: ElectLeadersRequest) -> ElectLeadersResponse:
    version = ctx.api_version
    Response = ElectLeadersResponse[version]
    Result = Response.ReplicaElectionResult
    wanted = (None if request.topic_partitions is None
              else [(t.topic, p) for t in request.topic_partitions for p in t.partitions])
    top_error = ErrorCode.NONE
    results: dict[TopicPartition, tuple[ErrorCode, str | None]]
    raw_type = request.election_type if version >= 1 else ElectionType.PREFERRED
    if raw_type not in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        # Kafka refuses the request as a whole: the top-level error, repeated for each partition named
        top_error = ErrorCode.INVALID_REQUEST
        results = {tp: (top_error, f"Unknown election type {raw_type}") for tp in wanted or []}
    elif ctx.services.cluster is not None:
        decided = ctx.services.cluster.controller.elect_leaders(ElectionType(raw_type), wanted)
        results = {tp: (code, message or None) for tp, (code, message) in decided.items()}
    else:
        results = _single_broker(ctx, wanted)
    by_topic: dict[str, list[object]] = {}
    for (topic, partition), (code, message) in results.items():
        by_topic.setdefault(topic, []).append(Result.PartitionResult(
            partition_id=partition, error_code=code, error_message=message if code != ErrorCode.NONE else None))
    answer = [Result(topic=topic, partition_result=parts) for topic, parts in by_topic.items()]
    if version >= 1:
        return Response(throttle_time_ms=0, error_code=top_error, replica_election_results=answer)
    return Response(throttle_time_ms=0, replica_election_results=answer)
