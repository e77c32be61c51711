"""WriteTxnMarkers (key 27): a transaction coordinator asks this broker to write COMMIT or ABORT
markers into the partitions it leads.

Each marker is appended to each of its partitions
(:class:`~minikafka.broker.transactions.markers.LocalMarkers`: in a cluster only by the leader, and
answered once the in-sync replicas have it); each partition gets its own error code, which the
coordinator retries or gives up on as Kafka's does. v1 is flexible; v0 (removed in Kafka 4.0) and
v2 (KIP-890 part 2's transaction version) are not served.
"""

from __future__ import annotations

from kafka.protocol.producer import WriteTxnMarkersRequest, WriteTxnMarkersResponse

from minikafka.broker.context import RequestContext
from minikafka.broker.transactions.markers import TxnMarker


async def handle(ctx: RequestContext, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    Response = WriteTxnMarkersResponse[ctx.api_version]
    Result = Response.WritableTxnMarkerResult
    TopicResult = Result.WritableTxnMarkerTopicResult
    PartitionResult = TopicResult.WritableTxnMarkerPartitionResult
    results = []
    for m in request.markers:
        marker = TxnMarker(m.producer_id, m.producer_epoch, bool(m.transaction_result), m.coordinator_epoch)
        partitions = [(t.name, p) for t in m.topics for p in t.partition_indexes]
        errors = await ctx.services.markers.write(marker, partitions)
        results.append(Result(producer_id=m.producer_id, topics=[
            TopicResult(name=t.name, partitions=[PartitionResult(partition_index=p, error_code=errors[(t.name, p)])
                                                 for p in t.partition_indexes])
            for t in m.topics]))
    return Response(markers=results)
