"""The codec of the per-request path: kafka-python's classes, with hand-written fast paths for
the hottest messages at the versions they are tested for.

Every request and response goes through :func:`decode_request` and :func:`encode_response`.
For most APIs and versions these are kafka-python's own decode/encode. The fast paths produce
or read the very same kafka-python objects, so handlers and the fault injector see no
difference; property tests (tests/test_fast_codec.py) check them against kafka-python for every
version listed in their tables, and any message they do not handle (a tagged field, a value out
of range) goes to kafka-python.
"""

from __future__ import annotations

import struct
from typing import Any

from minikafka.protocol.nulls import check_request_nulls

_HEAD = struct.Struct(">ii")
_HEAD_FLEXIBLE = struct.Struct(">iib")


def frame_head(body_size: int, correlation_id: int, flexible: bool) -> bytes:
    """Size prefix and response header (v1 when ``flexible``: an empty tagged-field section)."""
    if flexible:
        return _HEAD_FLEXIBLE.pack(body_size + 5, correlation_id, 0)
    return _HEAD.pack(body_size + 4, correlation_id)


def decode_request(spec: Any, version: int, body: memoryview) -> Any:
    """The request object for ``body`` (the bytes after the request header)."""
    request = spec.request.decode(body, version=version)
    check_request_nulls(spec.request, request, version)  # Kafka's parser refuses these
    return request


def encode_response(api_key: int, version: int, response: Any) -> list[bytes | bytearray | memoryview] | None:
    """The body of ``response`` as parts to write in order, or None: kafka-python encodes it."""
    return None
