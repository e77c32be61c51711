"""OffsetCommit (key 8): store a group's consumed positions, durably, in ``__consumer_offsets``.

Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION; the rest go to the coordinator,
which checks membership and generation (a generation of -1 commits without group management,
allowed while the group has no members). v1 may carry a commit timestamp, v2-v4 a retention
time, v6+ the leader epoch, v7+ the group.instance.id.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafka.protocol.consumer import OffsetCommitRequest, OffsetCommitResponse

from minikafka.broker.context import RequestContext
from minikafka.broker.groups.records import CommittedOffset
from minikafka.broker.partition_answers import cluster_topics, error_answers, known_partitions
from minikafka.storage.disk_format import TopicPartition


def requested_offsets(ctx: RequestContext, request_topics: Any, committed: Callable[[Any], CommittedOffset]
                      ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, CommittedOffset]]:
    """(UNKNOWN_TOPIC_OR_PARTITION for partitions that do not exist, the offsets to store for the
    others, built by ``committed`` from each partition entry); shared with TxnOffsetCommit."""
    errors, known = known_partitions(cluster_topics(ctx.services), request_topics)
    return errors, {tp: committed(p) for tp, p in known}


async def handle(ctx: RequestContext, request: OffsetCommitRequest) -> OffsetCommitResponse:
    version = ctx.api_version
    services = ctx.services
    groups = services.groups
    now = services.clock()
    retention = request.retention_time_ms if 2 <= version <= 4 else -1

    def committed(p: Any) -> CommittedOffset:
        return CommittedOffset(
            offset=p.committed_offset,
            leader_epoch=p.committed_leader_epoch if version >= 6 else -1,
            metadata=p.committed_metadata or "",
            commit_timestamp=p.commit_timestamp if version == 1 and p.commit_timestamp != -1 else now,
            expire_timestamp=now + retention if retention >= 0 else -1,
        )

    errors, offsets = requested_offsets(ctx, request.topics, committed)
    if offsets:
        errors.update(await groups.offsets.commit_offsets(
            request.group_id,
            request.member_id or "" if version >= 1 else "",
            request.group_instance_id if version >= 7 else None,
            request.generation_id_or_member_epoch if version >= 1 else -1,
            offsets,
            version,
        ))
    Response = OffsetCommitResponse[version]
    Topic = Response.OffsetCommitResponseTopic
    Partition = Topic.OffsetCommitResponsePartition
    fields: dict[str, Any] = {"topics": error_answers(Topic, Partition, request.topics, errors)}
    if version >= 3:
        fields["throttle_time_ms"] = 0
    return Response(**fields)
