"""ApiVersions (key 18): what this broker speaks, with the KIP-511 fallback (docs/semantics.md#api-versions)."""

from __future__ import annotations

import re
import struct
from typing import Any

from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from minikafka.broker.context import RequestContext
from minikafka.broker.dispatch import ApiSpec
from minikafka.errors import ErrorCode
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
