"""A cluster advertised under another address than it listens on, as in a container whose ports are
published elsewhere: clients are told the advertised host and ports (counting up from the
advertised port as the listening ports do), while the brokers replicate over the addresses they
are bound to, which is all they can reach from inside."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.protocol.metadata import MetadataRequest

from minikafka.broker.embedded import ClusterThread
from tests.cluster.test_cluster_failover import wait_for
from tests.kafka_wire import RawClient, build_batch, partition_response, produce_request


@pytest.fixture
def nowhere() -> Iterator[int]:
    """Three consecutive ports held bound and not listening: a connection there is refused."""
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = probe.getsockname()[1]
        held = []
        try:
            for port in range(base, base + 3):
                sock = socket.socket()
                held.append(sock)
                sock.bind(("127.0.0.1", port))
        except OSError:
            for sock in held:
                sock.close()
            continue
        try:
            yield base
        finally:
            for sock in held:
                sock.close()
        return


def test_clients_see_the_advertised_addresses_and_the_brokers_replicate_over_their_own(
        tmp_path: Path, nowhere: int) -> None:
    with ClusterThread(brokers=3, data_dir=str(tmp_path / "c"), advertised_host="kafka.example",
                       advertised_port=nowhere) as cluster:
        cluster.call(cluster.cluster.controller.create_topic, "boxed", 1, 3)
        real = {node: f"127.0.0.1:{cluster.cluster.brokers[node].port}" for node in (1, 2, 3)}
        with RawClient(real[1]) as client:
            metadata = client.request(MetadataRequest[1](topics=None))
        assert sorted((b.node_id, b.host, b.port) for b in metadata.brokers) == \
            [(1, "kafka.example", nowhere), (2, "kafka.example", nowhere + 1), (3, "kafka.example", nowhere + 2)]
        leader = cluster.leader("boxed", 0)
        with RawClient(real[leader]) as client:  # acks=all: answered once every replica has it
            answer = partition_response(client.request(produce_request("boxed", 0, bytes(build_batch(count=3)))))
        assert (answer.error_code, answer.base_offset) == (0, 0)
        ends = lambda: [cluster.call(lambda n=n: cluster.cluster.brokers[n].logs.get_log("boxed", 0).log_end_offset)  # noqa: E731
                        for n in (1, 2, 3)]
        wait_for(lambda: ends() == [3, 3, 3], "every replica at log end 3")
        assert sorted(cluster.state("boxed", 0).isr) == [1, 2, 3]
