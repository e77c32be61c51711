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
from kafka.protocol.consumer import FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.producer import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
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
    ]
    return {spec.key: spec for spec in specs}
