"""DescribeCluster (key 60): this node, as broker and controller."""

from __future__ import annotations

from kafka.protocol.admin import DescribeClusterRequest, DescribeClusterResponse

from minikafka.broker.context import RequestContext
from minikafka.errors import ErrorCode


async def handle(ctx: RequestContext, request: DescribeClusterRequest) -> DescribeClusterResponse:
    version = ctx.api_version
    services = ctx.services
    Response = DescribeClusterResponse[version]
    endpoint_type = getattr(request, "endpoint_type", 1) if version >= 1 else 1
    if endpoint_type != 1:
        return Response(throttle_time_ms=0, error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                        error_message="only broker endpoints are served", endpoint_type=endpoint_type,
                        cluster_id=ctx.services.storage.cluster_id, controller_id=-1, brokers=[])
    return Response(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        endpoint_type=1,
        cluster_id=ctx.services.storage.cluster_id,
        controller_id=services.node_id,
        brokers=[Response.DescribeClusterBroker(broker_id=services.node_id, host=ctx.advertised_address[0],
                                                 port=ctx.advertised_address[1], rack=None)],
    )
