"""Codec classes of ApiVersions (key 18) up to v5.

kafka-python 3 ships ApiVersions up to v4; v5 (KIP-1242) adds the cluster id and node id a client
expects to reach, so that a broker that is not the one it believes can tell it to bootstrap again.
The definitions are package data in :mod:`minikafka.protocol.schemas`, read by kafka-python's
loader; the response keeps kafka-python's ApiVersions rules (its header is header v0 in every
version, an error body decodes as v0).
"""

from __future__ import annotations

import types
from typing import Any

from kafka.protocol.metadata import ApiVersionsResponse as _KafkaPythonApiVersionsResponse

from minikafka.protocol.consumer_group_apis import SCHEMAS, message

ApiVersionsRequest = message("ApiVersionsRequest")
ApiVersionsResponse: Any = types.new_class("ApiVersionsResponse", (_KafkaPythonApiVersionsResponse,),
                                           {"load_json": SCHEMAS})
