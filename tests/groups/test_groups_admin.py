"""Admin clients inspect and clean up groups (issue: consumer groups): ListGroups, DescribeGroups,
OffsetFetch, OffsetCommit by an admin, OffsetDelete, LeaveGroup by group.instance.id and
DeleteGroups, through confluent-kafka's AdminClient, kafka-python's KafkaAdminClient and aiokafka's
AIOKafkaAdminClient.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from minikafka.broker.embedded import BrokerThread
from tests.groups.group_helpers import GROUP_BROKER_CONFIG, Clients, divides, poll_until
from tests.kafka_wire import RawClient
from tests.scenario_helpers import create_topic


@pytest.fixture
def gbroker(start_broker: Callable[..., BrokerThread]) -> BrokerThread:
    return start_broker(config=GROUP_BROKER_CONFIG)


def test_admin_clients_list_describe_commit_and_delete_groups(gbroker: BrokerThread, topic_name: str) -> None:
    from confluent_kafka import (
        ConsumerGroupState,
        ConsumerGroupTopicPartitions,
        KafkaException,
        TopicPartition,
    )
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTP
    from kafka.admin import MemberToRemove
    from kafka.errors import NoError
    from kafka.structs import OffsetAndMetadata

    bootstrap = gbroker.bootstrap
    with RawClient(bootstrap) as raw:
        create_topic(raw, topic_name, partitions=2)
    clients = Clients(bootstrap, "busy", topic_name)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    kadmin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        member = clients.new("confluent-kafka", "consumer-0", instance_id="instance-0")
        poll_until([member], lambda got: divides([member], 2), what="the consumer to own both partitions")

        # an admin commits offsets for a group without members (generation -1)
        done = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
            "idle", [TopicPartition(topic_name, 0, 5), TopicPartition(topic_name, 1, 7)])])
        assert [(tp.partition, tp.offset, tp.error) for tp in done["idle"].result(10).topic_partitions] == [
            (0, 5, None), (1, 7, None)]

        listed = admin.list_consumer_groups().result(10)
        assert not listed.errors
        assert {(g.group_id, g.state) for g in listed.valid} == {
            ("busy", ConsumerGroupState.STABLE), ("idle", ConsumerGroupState.EMPTY)}
        busy = admin.describe_consumer_groups(["busy"])["busy"].result(10)
        assert (busy.state, busy.partition_assignor, busy.is_simple_consumer_group) == (
            ConsumerGroupState.STABLE, "range", False)
        assert [(m.client_id, m.host, m.group_instance_id, sorted(tp.partition for tp in m.assignment.topic_partitions))
                for m in busy.members] == [("consumer-0", "/127.0.0.1", "instance-0", [0, 1])]
        offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("idle")])["idle"].result(10)
        assert sorted((tp.partition, tp.offset) for tp in offsets.topic_partitions) == [(0, 5), (1, 7)]
        with pytest.raises(KafkaException, match="NON_EMPTY_GROUP"):
            admin.delete_consumer_groups(["busy"])["busy"].result(10)

        # kafka-python's admin: the same view, plus offset deletion and member removal
        assert {(g["group_id"], g["group_state"], g["group_type"]) for g in kadmin.list_groups()} == {
            ("busy", "Stable", "classic"), ("idle", "Empty", "classic")}
        described = kadmin.describe_groups(["busy"])["busy"]
        assert [(m["group_instance_id"], m["member_assignment"]["assigned_partitions"])
                for m in described["members"]] == [("instance-0", [{"topic": topic_name, "partitions": [0, 1]}])]
        assert kadmin.alter_group_offsets("idle", {KTP(topic_name, 0): OffsetAndMetadata(9, "note", -1)}) == {
            KTP(topic_name, 0): NoError}
        assert kadmin.delete_group_offsets("idle", [KTP(topic_name, 1)]) == {KTP(topic_name, 1): NoError}
        assert kadmin.list_group_offsets({"idle": None})["idle"] == {
            KTP(topic_name, 0): OffsetAndMetadata(9, "note", -1)}
        # the static member is removed by its group.instance.id; the group is then empty
        assert kadmin.remove_group_members("busy", [MemberToRemove(group_instance_id="instance-0")]) == {
            "instance-0": NoError}
        assert kadmin.describe_groups(["busy"])["busy"]["group_state"] == "Empty"

        async def aiokafka_view() -> tuple[object, object]:
            from aiokafka.admin import AIOKafkaAdminClient

            aio = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
            await aio.start()
            try:
                return await aio.list_consumer_groups(), await aio.list_consumer_group_offsets("idle")
            finally:
                await aio.close()

        groups, idle_offsets = asyncio.run(aiokafka_view())
        assert sorted(groups) == [("busy", "consumer"), ("idle", "")]  # type: ignore[arg-type]
        assert {tp.partition: o.offset for tp, o in idle_offsets.items()} == {0: 9}  # type: ignore[attr-defined]

        for group in ("busy", "idle"):
            assert admin.delete_consumer_groups([group])[group].result(10) is None
        assert admin.list_consumer_groups().result(10).valid == []
    finally:
        kadmin.close()
        clients.close_all()
