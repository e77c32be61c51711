"""Valid requests for every API and version the broker serves, as the fuzz suite's seeds.

Core APIs get requests that do real work on the fuzz topic (so a mutation reaches deep code);
any other API in the dispatch table gets its schema's defaults with the group and topic
fields filled in, so a newly added API is fuzzed without anyone writing a builder.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from kafka.protocol.admin import (
    AlterConfigsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
    ListTransactionsRequest,
)
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest, OffsetForLeaderEpochRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    TxnOffsetCommitRequest,
)
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from minikafka.protocol.api_versions_apis import ApiVersionsRequest
from minikafka.protocol.apis import ApiCodec, ApiKey
from minikafka.protocol.consumer_group_apis import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest
from tests.kafka_wire import build_batch, produce_request

ZERO = uuid.UUID(int=0)


def metadata(v: int, topic: str) -> Any:
    R = MetadataRequest[v]
    return R(topics=[R.MetadataRequestTopic(name=topic, topic_id=ZERO)], allow_auto_topic_creation=False,
             include_cluster_authorized_operations=False, include_topic_authorized_operations=False)


def fetch(v: int, topic: str) -> Any:
    R = FetchRequest[v]
    return R(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
             session_epoch=-1,
             topics=[R.FetchTopic(topic=topic, partitions=[R.FetchTopic.FetchPartition(
                 partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
                 partition_max_bytes=1 << 20)])],
             forgotten_topics_data=[], rack_id="")


def list_offsets(v: int, topic: str) -> Any:
    R = ListOffsetsRequest[v]
    return R(replica_id=-1, isolation_level=0, topics=[R.ListOffsetsTopic(name=topic, partitions=[
        R.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1,
                                                max_num_offsets=1)])], timeout_ms=1000)


def create_topics(v: int, topic: str) -> Any:
    R = CreateTopicsRequest[v]
    return R(topics=[R.CreatableTopic(name=f"{topic}-new-v{v}", num_partitions=1, replication_factor=1,
                                      assignments=[], configs=[])], timeout_ms=1000, validate_only=True)


def delete_topics(v: int, topic: str) -> Any:
    R = DeleteTopicsRequest[v]
    name = f"{topic}-absent"
    return R(topic_names=[name], topics=[R.DeleteTopicState(name=name, topic_id=ZERO)], timeout_ms=1000)


def delete_records(v: int, topic: str) -> Any:
    R = DeleteRecordsRequest[v]
    return R(topics=[R.DeleteRecordsTopic(name=topic, partitions=[
        R.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0, offset=0)])], timeout_ms=1000)


def init_producer_id(v: int, topic: str) -> Any:
    return InitProducerIdRequest[v](transactional_id=None, transaction_timeout_ms=1000, producer_id=-1,
                                    producer_epoch=-1)


def describe_configs(v: int, topic: str) -> Any:
    R = DescribeConfigsRequest[v]
    return R(resources=[R.DescribeConfigsResource(resource_type=2, resource_name=topic, configuration_keys=None)],
             include_synonyms=False, include_documentation=False)


def alter_configs(v: int, topic: str) -> Any:
    """Validate-only, so the seed leaves the topic's settings as they are."""
    R = AlterConfigsRequest[v]
    Resource = R.AlterConfigsResource
    return R(resources=[Resource(resource_type=2, resource_name=topic, configs=[
        Resource.AlterableConfig(name="retention.ms", value="3600000")])], validate_only=True)


def incremental_alter_configs(v: int, topic: str) -> Any:
    R = IncrementalAlterConfigsRequest[v]
    Resource = R.AlterConfigsResource
    return R(resources=[Resource(resource_type=2, resource_name=topic, configs=[
        Resource.AlterableConfig(name="cleanup.policy", config_operation=2, value="compact")])], validate_only=True)


def create_partitions(v: int, topic: str) -> Any:
    R = CreatePartitionsRequest[v]
    return R(topics=[R.CreatePartitionsTopic(name=topic, count=1, assignments=None)], timeout_ms=1000,
             validate_only=True)


def elect_leaders(v: int, topic: str) -> Any:
    R = ElectLeadersRequest[v]
    return R(election_type=0, topic_partitions=[R.TopicPartitions(topic=topic, partitions=[0])], timeout_ms=1000)


def describe_producers(v: int, topic: str, partitions: int = 1) -> Any:
    R = DescribeProducersRequest[v]
    return R(topics=[R.TopicRequest(name=topic, partition_indexes=list(range(partitions)))])


#: A transactional id no producer initialised: the transaction APIs answer it, with the error below.
FUZZ_TXN = "fuzz-txn"


def add_partitions_to_txn(v: int, topic: str) -> Any:
    R = AddPartitionsToTxnRequest[v]
    topics = [R.AddPartitionsToTxnTopic(name=topic, partitions=[0])]
    if v >= 4:
        return R(transactions=[R.AddPartitionsToTxnTransaction(transactional_id=FUZZ_TXN, producer_id=0,
                                                                producer_epoch=0, verify_only=True, topics=topics)])
    return R(v3_and_below_transactional_id=FUZZ_TXN, v3_and_below_producer_id=0, v3_and_below_producer_epoch=0,
             v3_and_below_topics=topics)


def txn_offset_commit(v: int, topic: str) -> Any:
    R = TxnOffsetCommitRequest[v]
    Topic = R.TxnOffsetCommitRequestTopic
    return R(transactional_id=FUZZ_TXN, group_id=f"{topic}-group", producer_id=0, producer_epoch=0,
             generation_id=-1, member_id="", group_instance_id=None,
             topics=[Topic(name=topic, partitions=[Topic.TxnOffsetCommitRequestPartition(
                 partition_index=0, committed_offset=0, committed_leader_epoch=-1, committed_metadata="")])])


def offset_for_leader_epoch(v: int, topic: str) -> Any:
    R = OffsetForLeaderEpochRequest[v]
    Topic = R.OffsetForLeaderTopic
    return R(replica_id=-1, topics=[Topic(topic=topic, partitions=[
        Topic.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=0)])])


def consumer_group_heartbeat(v: int, topic: str) -> Any:
    """A join of a KIP-848 group (member ids are the client's from v1)."""
    fields: dict[str, Any] = dict(group_id=f"{topic}-cg", member_id="fuzz-member", member_epoch=0,
                                  rebalance_timeout_ms=1000, subscribed_topic_names=[topic], topic_partitions=[])
    if v >= 1:
        fields["subscribed_topic_regex"] = ""
    return ConsumerGroupHeartbeatRequest[v](**fields)


SPECIFIC: dict[ApiKey, Callable[[int, str], Any]] = {
    ApiKey.PRODUCE: lambda v, topic: produce_request(topic, 0, build_batch(value=b"fuzz-seed"), version=v),
    ApiKey.FETCH: fetch,
    ApiKey.LIST_OFFSETS: list_offsets,
    ApiKey.METADATA: metadata,
    ApiKey.SASL_HANDSHAKE: lambda v, topic: SaslHandshakeRequest[v](mechanism="PLAIN"),
    ApiKey.API_VERSIONS:
        lambda v, topic: ApiVersionsRequest[v](client_software_name="fuzz", client_software_version="1.0"),
    ApiKey.CREATE_TOPICS: create_topics,
    ApiKey.DELETE_TOPICS: delete_topics,
    ApiKey.DELETE_RECORDS: delete_records,
    ApiKey.INIT_PRODUCER_ID: init_producer_id,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: offset_for_leader_epoch,
    ApiKey.ADD_PARTITIONS_TO_TXN: add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN:
        lambda v, topic: AddOffsetsToTxnRequest[v](transactional_id=FUZZ_TXN, producer_id=0, producer_epoch=0,
                                                   group_id=f"{topic}-group"),
    ApiKey.END_TXN:
        lambda v, topic: EndTxnRequest[v](transactional_id=FUZZ_TXN, producer_id=0, producer_epoch=0,
                                          committed=True),
    ApiKey.TXN_OFFSET_COMMIT: txn_offset_commit,
    ApiKey.DESCRIBE_CONFIGS: describe_configs,
    ApiKey.ALTER_CONFIGS: alter_configs,
    ApiKey.SASL_AUTHENTICATE:
        lambda v, topic: SaslAuthenticateRequest[v](auth_bytes=b"\x00alice\x00alice-secret"),
    ApiKey.CREATE_PARTITIONS: create_partitions,
    ApiKey.ELECT_LEADERS: elect_leaders,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: incremental_alter_configs,
    ApiKey.DESCRIBE_CLUSTER:
        lambda v, topic: DescribeClusterRequest[v](include_cluster_authorized_operations=False,
                                                   endpoint_type=1),
    ApiKey.DESCRIBE_PRODUCERS: describe_producers,
    ApiKey.DESCRIBE_TRANSACTIONS:
        lambda v, topic: DescribeTransactionsRequest[v](transactional_ids=[FUZZ_TXN]),
    ApiKey.LIST_TRANSACTIONS:
        lambda v, topic: ListTransactionsRequest[v](state_filters=[], producer_id_filters=[],
                                                    duration_filter=-1),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: consumer_group_heartbeat,
    ApiKey.CONSUMER_GROUP_DESCRIBE:
        lambda v, topic: ConsumerGroupDescribeRequest[v](group_ids=[f"{topic}-cg"], include_authorized_operations=False),
}

#: The top-level error the requests above get where it is not NONE, per (API key, version): the
#: transactional id is unknown (49), and AddPartitionsToTxn v4+ is for brokers only (31).
EXPECTED_ERRORS: dict[tuple[int, int], int] = {
    **{(24, v): 31 for v in (4, 5)},
    **{(25, v): 49 for v in range(5)},
    **{(26, v): 49 for v in range(5)},
}

#: Top-level fields a generic request gets filled in (when its schema has them).
GENERIC_FIELDS: dict[str, Callable[[str], Any]] = {
    "group_id": lambda topic: f"{topic}-group",
    "groups": lambda topic: [f"{topic}-group"],
    "member_id": lambda topic: "",
    "protocol_type": lambda topic: "consumer",
    "session_timeout_ms": lambda topic: 10000,
    "rebalance_timeout_ms": lambda topic: 1000,
    "generation_id": lambda topic: -1,
}


def request_for(spec: ApiCodec, version: int, topic: str) -> Any:
    """A request of ``spec`` at ``version`` that the broker can serve."""
    if spec.key in SPECIFIC:
        return SPECIFIC[spec.key](version, topic)
    Request = spec.request[version]
    defaults = Request()
    fields = {name: make(topic) for name, make in GENERIC_FIELDS.items() if hasattr(defaults, name)}
    if spec.key == ApiKey.JOIN_GROUP and hasattr(Request, "JoinGroupRequestProtocol"):  # JoinGroup needs one protocol
        fields["protocols"] = [Request.JoinGroupRequestProtocol(name="range", metadata=b"")]
    try:
        request = Request(**fields)
        request.encode(version=version)
        return request
    except Exception:  # a field our guess does not fit: the schema defaults still make a valid request
        return defaults


def encode(request: Any, correlation_id: int, client_id: str = "fuzz") -> bytes:
    """The frame payload (header and body, no size prefix) kafka-python would send."""
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(request.encode(framed=False, header=True))
