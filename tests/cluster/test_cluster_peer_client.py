"""A broker's connection to another broker: real requests to a real broker over loopback."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from pathlib import Path

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from minikafka.broker.cluster.peer_client import PeerClient, PeerUnavailable
from minikafka.broker.embedded import BrokerThread


async def test_pipelined_requests_each_get_their_own_answer(broker: BrokerThread) -> None:
    client = PeerClient("127.0.0.1", broker.port, "broker-2")
    try:
        versions, *metadata = await asyncio.gather(
            client.request(ApiVersionsRequest[3](client_software_name="minikafka", client_software_version="1"), 5),
            *(client.request(MetadataRequest[12](topics=None, allow_auto_topic_creation=False,
                                                 include_topic_authorized_operations=False), 5)
              for _ in range(20)))
        assert versions.error_code == 0 and versions.api_keys
        assert len(metadata) == 20
        assert all(m.brokers[0].node_id == broker.broker.node_id for m in metadata)
        assert client.connected
    finally:
        await client.close()


async def test_a_broker_that_stops_fails_the_request_and_one_that_returns_is_reached_again(
        start_broker: Callable[..., BrokerThread], tmp_path: Path) -> None:
    first = start_broker(data_dir=tmp_path / "d")
    port = first.port
    client = PeerClient("127.0.0.1", port, "broker-2", connect_timeout=2)
    request = lambda: ApiVersionsRequest[3](client_software_name="m", client_software_version="1")  # noqa: E731
    try:
        assert (await client.request(request(), 5)).error_code == 0
        await asyncio.to_thread(first.stop)
        with pytest.raises(PeerUnavailable):
            await client.request(request(), 5)
        assert not client.connected
        again = BrokerThread(data_dir=str(tmp_path / "d"), port=port)
        await asyncio.to_thread(again.start)
        try:
            assert (await client.request(request(), 5)).error_code == 0
        finally:
            await asyncio.to_thread(again.stop)
    finally:
        await client.close()


async def test_nothing_listening_is_peer_unavailable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: connections are refused
        client = PeerClient("127.0.0.1", port, "broker-2", connect_timeout=2)
        with pytest.raises(PeerUnavailable, match=f"127.0.0.1:{port}"):
            await client.request(ApiVersionsRequest[0](), 5)
