"""The dispatch table: API key -> request/response classes, served versions, handler.

This is the one place that says which Kafka APIs minikafka speaks; ApiVersions advertises
exactly this table.
"""

from __future__ import annotations

from kafka.protocol.admin import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeProducersRequest,
    DescribeProducersResponse,
)
from kafka.protocol.admin.groups import (  # consumer groups
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.consumer import FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.consumer.group import (  # consumer groups
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse  # groups
from kafka.protocol.producer import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)
from kafka.protocol.sasl import (  # SASL listeners
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from minikafka.broker.handlers import (
    api_versions,
    create_partitions,
    create_topics,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    describe_producers,
    fetch,
    init_producer_id,
    list_offsets,
    metadata,
    produce,
)
from minikafka.broker.handlers.delete_groups import handle as delete_groups  # consumer groups
from minikafka.broker.handlers.describe_groups import handle as describe_groups  # consumer groups
from minikafka.broker.handlers.find_coordinator import handle as find_coordinator  # consumer groups
from minikafka.broker.handlers.heartbeat import handle as heartbeat  # consumer groups
from minikafka.broker.handlers.join_group import handle as join_group  # consumer groups
from minikafka.broker.handlers.leave_group import handle as leave_group  # consumer groups
from minikafka.broker.handlers.list_groups import handle as list_groups  # consumer groups
from minikafka.broker.handlers.offset_commit import handle as offset_commit  # consumer groups
from minikafka.broker.handlers.offset_delete import handle as offset_delete  # consumer groups
from minikafka.broker.handlers.offset_fetch import handle as offset_fetch  # consumer groups
from minikafka.broker.handlers.sasl_authenticate import handle as sasl_authenticate  # SASL listeners
from minikafka.broker.handlers.sasl_handshake import handle as sasl_handshake  # SASL listeners
from minikafka.broker.handlers.sync_group import handle as sync_group  # consumer groups
from minikafka.protocol.apis import ApiSpec


def build_api_table() -> dict[int, ApiSpec]:
    specs = [
        ApiSpec(ProduceRequest, ProduceResponse, 3, 12, produce.handle),
        ApiSpec(FetchRequest, FetchResponse, 4, 12, fetch.handle),
        ApiSpec(ListOffsetsRequest, ListOffsetsResponse, 1, 8, list_offsets.handle),
        ApiSpec(MetadataRequest, MetadataResponse, 0, 12, metadata.handle),
        ApiSpec(ApiVersionsRequest, ApiVersionsResponse, 0, 4, api_versions.handle),
        ApiSpec(CreateTopicsRequest, CreateTopicsResponse, 0, 7, create_topics.handle),
        ApiSpec(DeleteTopicsRequest, DeleteTopicsResponse, 0, 6, delete_topics.handle),
        ApiSpec(DeleteRecordsRequest, DeleteRecordsResponse, 0, 2, delete_records.handle),
        ApiSpec(InitProducerIdRequest, InitProducerIdResponse, 0, 5, init_producer_id.handle),
        ApiSpec(DescribeConfigsRequest, DescribeConfigsResponse, 0, 4, describe_configs.handle),
        ApiSpec(CreatePartitionsRequest, CreatePartitionsResponse, 0, 3, create_partitions.handle),
        ApiSpec(DescribeClusterRequest, DescribeClusterResponse, 0, 1, describe_cluster.handle),
        ApiSpec(DescribeProducersRequest, DescribeProducersResponse, 0, 0, describe_producers.handle),
        # consumer groups
        ApiSpec(OffsetCommitRequest, OffsetCommitResponse, 0, 9, offset_commit),
        ApiSpec(OffsetFetchRequest, OffsetFetchResponse, 0, 9, offset_fetch),
        ApiSpec(FindCoordinatorRequest, FindCoordinatorResponse, 0, 4, find_coordinator),
        ApiSpec(JoinGroupRequest, JoinGroupResponse, 0, 9, join_group),
        ApiSpec(HeartbeatRequest, HeartbeatResponse, 0, 4, heartbeat),
        ApiSpec(LeaveGroupRequest, LeaveGroupResponse, 0, 5, leave_group),
        ApiSpec(SyncGroupRequest, SyncGroupResponse, 0, 5, sync_group),
        ApiSpec(DescribeGroupsRequest, DescribeGroupsResponse, 0, 6, describe_groups),
        ApiSpec(ListGroupsRequest, ListGroupsResponse, 0, 5, list_groups),
        ApiSpec(DeleteGroupsRequest, DeleteGroupsResponse, 0, 2, delete_groups),
        ApiSpec(OffsetDeleteRequest, OffsetDeleteResponse, 0, 0, offset_delete),
        # SASL listeners (minikafka.broker.sasl); on other listeners they answer ILLEGAL_SASL_STATE
        ApiSpec(SaslHandshakeRequest, SaslHandshakeResponse, 0, 1, sasl_handshake),
        ApiSpec(SaslAuthenticateRequest, SaslAuthenticateResponse, 0, 2, sasl_authenticate),
    ]
    return {spec.key: spec for spec in specs}
