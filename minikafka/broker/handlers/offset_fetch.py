"""OffsetFetch (key 9): a group's committed offsets (v2+: all of them when no topics are given;
v8+: several groups in one request).

A partition without a committed offset answers offset -1 with no error, as Kafka does. With
``require_stable`` (v7+, read_committed consumers) a partition whose transactional offsets wait
for their transaction's marker answers UNSTABLE_OFFSET_COMMIT (offset -1) so the consumer retries.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import OffsetFetchRequest, OffsetFetchResponse

from minikafka.broker.context import RequestContext
from minikafka.broker.groups.coordinator import GroupCoordinator
from minikafka.broker.groups.records import CommittedOffset
from minikafka.errors import ErrorCode

#: Stands for "transactional offsets pending" in :func:`_fetch`'s answer (offset -1, error 88).
UNSTABLE = CommittedOffset(offset=-1, leader_epoch=-1, metadata="", commit_timestamp=-1)


def _partition_error(committed: CommittedOffset | None) -> int:
    return ErrorCode.UNSTABLE_OFFSET_COMMIT if committed is UNSTABLE else ErrorCode.NONE


def _fetch(groups: GroupCoordinator, group_id: str | None, topics: Any, partitions_on_error: bool = False,
           require_stable: bool = False, member: tuple[str | None, int] = (None, -1)
           ) -> tuple[int, list[tuple[str, list[tuple[int, CommittedOffset | None]]]]]:
    """(group error, [(topic, [(partition, committed offset or None)])]); on a group error the
    requested partitions are listed only with ``partitions_on_error``. With ``require_stable``,
    a partition with pending transactional offsets is listed as UNSTABLE (see :func:`_partition_error`)."""
    wanted = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    error, found = groups.offsets.fetch_offsets(group_id, wanted, *member)
    by_topic: dict[str, list[tuple[int, CommittedOffset | None]]] = {}
    if error == ErrorCode.NONE:
        for (topic, partition), committed in found.items():
            if require_stable and group_id is not None and groups.offsets.has_pending_txn_offsets(group_id, (topic, partition)):
                committed = UNSTABLE
            by_topic.setdefault(topic, []).append((partition, committed))
    elif wanted is not None and partitions_on_error:
        for topic, partition in wanted:
            by_topic.setdefault(topic, []).append((partition, None))
    return error, list(by_topic.items())


async def handle(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    version = ctx.api_version
    groups = ctx.services.groups
    Response = OffsetFetchResponse[version]
    if version >= 8:
        Group = Response.OffsetFetchResponseGroup
        Topic = Group.OffsetFetchResponseTopics
        Partition = Topic.OffsetFetchResponsePartitions
        out = []
        for g in request.groups:
            member = (g.member_id, g.member_epoch) if version >= 9 else (None, -1)
            error, topics = _fetch(groups, g.group_id, g.topics, require_stable=request.require_stable,
                                   member=member)
            out.append(Group(group_id=g.group_id, error_code=error, topics=[
                Topic(name=name, partitions=[
                    Partition(partition_index=p, committed_offset=c.offset if c else -1,
                              committed_leader_epoch=c.leader_epoch if c else -1,
                              metadata=c.metadata if c else "", error_code=_partition_error(c))
                    for p, c in parts
                ])
                for name, parts in topics
            ]))
        return Response(throttle_time_ms=0, groups=out)

    Topic = Response.OffsetFetchResponseTopic
    Partition = Topic.OffsetFetchResponsePartition
    topics_arg = request.topics
    error, topics = _fetch(groups, request.group_id, topics_arg, partitions_on_error=version < 2,
                           require_stable=version >= 7 and bool(request.require_stable))
    # Before v2 there is no group-level error field: each partition carries it.
    partition_error = error if version < 2 else 0
    out_topics = []
    for name, parts in topics:
        partitions = []
        for p, c in parts:
            fields: dict[str, Any] = {"partition_index": p, "committed_offset": c.offset if c else -1,
                                      "metadata": c.metadata if c else "",
                                      "error_code": partition_error or _partition_error(c)}
            if version >= 5:
                fields["committed_leader_epoch"] = c.leader_epoch if c else -1
            partitions.append(Partition(**fields))
        out_topics.append(Topic(name=name, partitions=partitions))
    response: dict[str, Any] = {"topics": out_topics}
    if version >= 2:
        response["error_code"] = error
    if version >= 3:
        response["throttle_time_ms"] = 0
    return Response(**response)
