"""Every advertised (API, version) pair answers a valid request with a response of that version.

The requests are built with kafka-python's message classes for each version, sent over a real
socket, and the response decoded with the same version: an encoding mistake in any version
of any API shows up here, not in some client months later.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from kafka.protocol.admin import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeProducersRequest,
)
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.producer import InitProducerIdRequest

from minikafka.broker.dispatch import build_api_table
from minikafka.broker.embedded import BrokerThread
from tests.kafka_wire import RawClient, build_batch, produce_request
from tests.scenario_helpers import create_topic

T = "versions"


def _metadata(v: int) -> Any:
    R = MetadataRequest[v]
    return R(topics=[R.MetadataRequestTopic(name=T, topic_id=uuid.UUID(int=0))], allow_auto_topic_creation=False,
             include_cluster_authorized_operations=False, include_topic_authorized_operations=False)


def _fetch(v: int) -> Any:
    R = FetchRequest[v]
    return R(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
             session_epoch=-1,
             topics=[R.FetchTopic(topic=T, partitions=[R.FetchTopic.FetchPartition(
                 partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
                 partition_max_bytes=1 << 20)])],
             forgotten_topics_data=[], rack_id="")


def _list_offsets(v: int) -> Any:
    R = ListOffsetsRequest[v]
    return R(replica_id=-1, isolation_level=0, topics=[R.ListOffsetsTopic(name=T, partitions=[
        R.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1,
                                                max_num_offsets=1)])], timeout_ms=1000)


def _create_topics(v: int) -> Any:
    R = CreateTopicsRequest[v]
    return R(topics=[R.CreatableTopic(name=f"created-v{v}", num_partitions=1, replication_factor=1, assignments=[],
                                      configs=[])], timeout_ms=1000, validate_only=False)


def _delete_topics(v: int) -> Any:
    R = DeleteTopicsRequest[v]
    return R(topic_names=["nonexistent"], topics=[R.DeleteTopicState(name="nonexistent", topic_id=uuid.UUID(int=0))],
             timeout_ms=1000)


def _delete_records(v: int) -> Any:
    R = DeleteRecordsRequest[v]
    return R(topics=[R.DeleteRecordsTopic(name=T, partitions=[
        R.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0, offset=0)])], timeout_ms=1000)


def _init_producer_id(v: int) -> Any:
    return InitProducerIdRequest[v](transactional_id=None, transaction_timeout_ms=1000, producer_id=-1,
                                    producer_epoch=-1)


def _describe_configs(v: int) -> Any:
    R = DescribeConfigsRequest[v]
    return R(resources=[R.DescribeConfigsResource(resource_type=2, resource_name=T, configuration_keys=None)],
             include_synonyms=False, include_documentation=False)


def _create_partitions(v: int) -> Any:
    R = CreatePartitionsRequest[v]
    return R(topics=[R.CreatePartitionsTopic(name=T, count=1, assignments=None)], timeout_ms=1000,
             validate_only=True)


def _describe_producers(v: int) -> Any:
    R = DescribeProducersRequest[v]
    return R(topics=[R.TopicRequest(name=T, partition_indexes=[0])])


BUILDERS: dict[int, Callable[[int], Any]] = {
    0: lambda v: produce_request(T, 0, build_batch(), version=v),
    1: _fetch,
    2: _list_offsets,
    3: _metadata,
    18: lambda v: ApiVersionsRequest[v](client_software_name="tests", client_software_version="1.0"),
    19: _create_topics,
    20: _delete_topics,
    21: _delete_records,
    22: _init_producer_id,
    32: _describe_configs,
    37: _create_partitions,
    60: lambda v: DescribeClusterRequest[v](include_cluster_authorized_operations=False, endpoint_type=1),
    61: _describe_producers,
}

CASES = [(spec.key, v) for spec in build_api_table().values() if spec.key in BUILDERS
         for v in range(spec.min_version, spec.max_version + 1)]


def test_every_api_in_the_table_has_a_version_case() -> None:
    core = {0, 1, 2, 3, 18, 19, 20, 21, 22, 32, 37, 60, 61}
    assert core <= set(build_api_table()), "a core API went missing from the dispatch table"


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory: pytest.TempPathFactory) -> Any:
    broker = BrokerThread(data_dir=str(tmp_path_factory.mktemp("versions")), port=0).start()
    with RawClient(broker.bootstrap) as c:
        create_topic(c, T)
    yield broker
    broker.stop()


@pytest.mark.parametrize(("api_key", "version"), CASES, ids=[f"api{k}-v{v}" for k, v in CASES])
def test_request_of_each_version_gets_a_decodable_response_of_that_version(
    shared_broker: BrokerThread, api_key: int, version: int
) -> None:
    request = BUILDERS[api_key](version)
    with RawClient(shared_broker.bootstrap) as c:
        response = c.request(request)
    assert response.API_VERSION == version
    if hasattr(response, "error_code") and api_key != 18:
        assert response.error_code == 0, response
    if api_key == 18:
        assert response.error_code == 0
        assert {k.api_key for k in response.api_keys} == set(build_api_table())
