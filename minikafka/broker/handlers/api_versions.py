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
    return Response(**fields)
