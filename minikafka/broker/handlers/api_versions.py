"""ApiVersions (key 18): what this broker speaks, with the KIP-511 fallback (docs/semantics.md#api-versions).

v5 (KIP-1242) carries the cluster id and node id the client expects to reach (both or neither,
else INVALID_REQUEST); a broker that is not that one (another cluster, or another broker now at
the address) answers REBOOTSTRAP_REQUIRED, so that the client bootstraps again instead of
mixing two clusters' metadata. The cluster id is the one kept in the data dir (``meta.properties``)
across restarts.
"""

from __future__ import annotations

import re
import struct
from typing import Any

from minikafka.broker.context import RequestContext
from minikafka.broker.dispatch import ApiSpec
from minikafka.errors import ErrorCode
from minikafka.protocol.api_versions_apis import ApiVersionsRequest, ApiVersionsResponse
from minikafka.protocol.apis import ApiKey

GROUP_VERSION = "group.version"
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def unsupported_version_body(table: dict[int, ApiSpec]) -> bytes:
    """A v0-format body with UNSUPPORTED_VERSION listing ApiVersions' own range."""
    spec = table[ApiKey.API_VERSIONS]
    return struct.pack(">hihhh", ErrorCode.UNSUPPORTED_VERSION, 1, spec.key, spec.min_version, spec.max_version)


async def handle(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    version = ctx.api_version
    Response = ApiVersionsResponse[version]
    error = ErrorCode.NONE
    if version >= 3:
        for value in (request.client_software_name, request.client_software_version):
            if not value or not _SOFTWARE.fullmatch(value):
                error = ErrorCode.INVALID_REQUEST
    if version >= 5 and not error:
        error = _expected_broker_error(ctx, request.cluster_id, request.node_id)
    keys = [] if error else [
        Response.ApiVersion(api_key=spec.key, min_version=spec.min_version, max_version=spec.max_version)
        for spec in sorted(ctx.services.api_table.values(), key=lambda s: s.key)
    ]
    fields: dict[str, Any] = {"error_code": error, "api_keys": keys}
    if version >= 1:
        fields["throttle_time_ms"] = 0
    if version >= 3 and not error:
        fields.update(_features(Response, version, ctx.services.groups.consumer.enabled))
    return Response(**fields)


def _expected_broker_error(ctx: RequestContext, cluster_id: str | None, node_id: int) -> ErrorCode:
    """KIP-1242: NONE when the request names no broker or names this one."""
    if (cluster_id is None) != (node_id == -1):
        return ErrorCode.INVALID_REQUEST  # one without the other
    if cluster_id is None or (cluster_id == ctx.services.storage.cluster_id and node_id == ctx.services.node_id):
        return ErrorCode.NONE
    return ErrorCode.REBOOTSTRAP_REQUIRED


def _features(Response: Any, version: int, consumer_protocol: bool) -> dict[str, Any]:
    """The ``group.version`` feature, as Kafka 4.x advertises it (clients may choose the KIP-848
    consumer group protocol by it): supported levels 0-1, finalized at 1 while the protocol is
    enabled. Requests before v4 do not see supported features whose minimum level is 0
    (KAFKA-17011), so only v4 lists the supported range. Other features (``transaction.version``,
    ``metadata.version``) are not advertised: minikafka does not implement transactions v2."""
    out: dict[str, Any] = {}
    if version >= 4:
        out["supported_features"] = [Response.SupportedFeatureKey(name=GROUP_VERSION, min_version=0, max_version=1)]
    if consumer_protocol:
        out["finalized_features_epoch"] = 0
        out["finalized_features"] = [Response.FinalizedFeatureKey(name=GROUP_VERSION, max_version_level=1,
                                                                  min_version_level=1)]
    return out
