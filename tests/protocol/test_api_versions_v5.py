"""ApiVersions v5 (KIP-1242): a client names the cluster and broker it expects to reach; a broker
that is not that one answers REBOOTSTRAP_REQUIRED, one naming only half of it INVALID_REQUEST.
The cluster id is the one in the data dir, kept across restarts; in a cluster every broker has
the cluster's id and its own node id."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kafka.protocol.api_message import ApiMessage

from minikafka.broker.embedded import BrokerThread, ClusterThread
from minikafka.errors import ErrorCode
from minikafka.protocol.api_versions_apis import ApiVersionsRequest, ApiVersionsResponse
from tests.kafka_wire import RawClient


def api_versions_v5(address: str, cluster_id: str | None, node_id: int) -> tuple[int, list[int]]:
    """(error, the API keys listed) of a v5 request naming ``cluster_id`` / ``node_id``."""
    with RawClient(address) as c:
        c.send(ApiVersionsRequest[5](client_software_name="t", client_software_version="1",
                                    cluster_id=cluster_id, node_id=node_id))
        body = memoryview(c.recv_frame())[4:]  # response header v0: the correlation id
        response = ApiMessage.decode.__func__(ApiVersionsResponse, body, version=5)  # in v5 even with an error
    return response.error_code, [k.api_key for k in response.api_keys]


def cluster_id_of(broker: BrokerThread) -> str:
    return str(broker.call(lambda: broker.broker.logs.cluster_id))


def test_v5_checks_the_cluster_and_node_it_names(start_broker: Callable[..., BrokerThread], tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    broker = start_broker(data_dir=str(data_dir))
    cluster_id = cluster_id_of(broker)
    error, keys = api_versions_v5(broker.bootstrap, None, -1)  # names none: the usual answer
    assert error == ErrorCode.NONE and 18 in keys
    assert api_versions_v5(broker.bootstrap, cluster_id, 1)[0] == ErrorCode.NONE
    assert api_versions_v5(broker.bootstrap, cluster_id, 2) == (ErrorCode.REBOOTSTRAP_REQUIRED, [])
    assert api_versions_v5(broker.bootstrap, "another-cluster", 1) == (ErrorCode.REBOOTSTRAP_REQUIRED, [])
    assert api_versions_v5(broker.bootstrap, cluster_id, -1) == (ErrorCode.INVALID_REQUEST, [])
    assert api_versions_v5(broker.bootstrap, None, 1) == (ErrorCode.INVALID_REQUEST, [])
    broker.stop()
    again = start_broker(data_dir=str(data_dir))  # the same data dir: the same cluster
    assert api_versions_v5(again.bootstrap, cluster_id, 1)[0] == ErrorCode.NONE


def test_in_a_cluster_each_broker_is_itself_in_the_clusters_id(tmp_path: Path) -> None:
    with ClusterThread(brokers=2, data_dir=str(tmp_path / "c")) as cluster:
        cluster_id = cluster.call(lambda: cluster.cluster.controller.cluster_id)
        for node in (1, 2):
            assert api_versions_v5(cluster.address(node), cluster_id, node)[0] == ErrorCode.NONE
            assert api_versions_v5(cluster.address(node), cluster_id, 3 - node)[0] == ErrorCode.REBOOTSTRAP_REQUIRED
