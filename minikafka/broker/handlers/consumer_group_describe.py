"""ConsumerGroupDescribe (key 69): the members, epochs, subscriptions and assignments of KIP-848
consumer groups; a classic group answers GROUP_ID_NOT_FOUND ("not a consumer group"), as Kafka does."""

from __future__ import annotations

from typing import Any

from minikafka.broker.context import RequestContext
from minikafka.broker.groups.consumer_records import Assignment
from minikafka.broker.partition_answers import cluster_topics
from minikafka.protocol.consumer_group_apis import ConsumerGroupDescribeResponse

#: MemberType of v1: a member that speaks the consumer protocol
CONSUMER_MEMBER = 1
NOT_REQUESTED = -2147483648


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    Response = ConsumerGroupDescribeResponse[version]
    Group = Response.DescribedGroup
    groups = ctx.services.groups
    # the cluster's topics, not this broker's logs: the coordinator may hold no replica of them
    names = {info.topic_id: name for name, info in cluster_topics(ctx.services).items()}

    def partitions(assignment: Assignment) -> Any:
        return Group.Member.Assignment(topic_partitions=[
            Group.Member.Assignment.TopicPartitions(topic_id=tid, topic_name=names[tid], partitions=sorted(ps))
            for tid, ps in sorted(assignment.items()) if ps and tid in names])

    out = []
    for group_id in request.group_ids or []:
        error, message, group = groups.admin.describe_consumer_group(group_id)
        if group is None:
            out.append(Group(error_code=error, error_message=message, group_id=group_id or "", group_state="Dead",
                             group_epoch=-1, assignment_epoch=-1, assignor_name="", members=[],
                             authorized_operations=NOT_REQUESTED))
            continue
        members = []
        for m in group.members.values():
            sub = m.subscription
            fields: dict[str, Any] = dict(
                member_id=m.member_id, instance_id=sub.instance_id, rack_id=sub.rack_id, member_epoch=m.epoch,
                client_id=sub.client_id, client_host=sub.client_host, subscribed_topic_names=list(sub.topic_names),
                subscribed_topic_regex=sub.regex, assignment=partitions(m.current.assigned),
                target_assignment=partitions(group.targets.get(m.member_id, {})))
            if version >= 1:
                fields["member_type"] = CONSUMER_MEMBER
            members.append(Group.Member(**fields))
        out.append(Group(error_code=0, error_message=None, group_id=group.group_id, group_state=group.state,
                         group_epoch=group.epoch, assignment_epoch=group.assignment_epoch,
                         assignor_name=group.preferred_assignor(groups.consumer.assignors[0]), members=members,
                         authorized_operations=NOT_REQUESTED))
    return Response(throttle_time_ms=0, groups=out)
