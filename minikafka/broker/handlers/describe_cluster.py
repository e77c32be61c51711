"""DescribeCluster (key 60): this node as broker and controller; in a cluster, every broker that is up."""

from __future__ import annotations

from kafka.protocol.admin import DescribeClusterRequest, DescribeClusterResponse

from minikafka.broker.cluster import answers
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
    link = services.cluster
    if link is None:
        controller_id = services.node_id
        brokers = [Response.DescribeClusterBroker(broker_id=services.node_id, host=ctx.advertised_address[0],
                                                  port=ctx.advertised_address[1], rack=None)]
    else:  # a cluster: the brokers that are up, and a controller chosen anew for each answer
        controller_id = link.controller.controller_id()
        brokers = [Response.DescribeClusterBroker(broker_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
                   for b in answers.brokers(link)]
    return Response(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        endpoint_type=1,
        cluster_id=ctx.services.storage.cluster_id,
        controller_id=controller_id,
        brokers=brokers,
    )
