"""The API table entry type: which request/response classes and versions an API key has.

The table itself lives with the handlers (:mod:`minikafka.broker.dispatch`). An entry names its
codec classes and its handler module rather than holding them, and loads them the first time a
request of that API arrives: kafka-python builds every message class from its JSON schema at
import, and importing all of them up front was a third of ``minikafka serve``'s start-up.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from minikafka._kafka_codec import load_quietly

if TYPE_CHECKING:
    from kafka.protocol.api_message import ApiMessage

    from minikafka.broker.context import RequestContext

#: A handler module's ``handle(ctx, request)``. Each handler takes its own API's request family (e.g.
#: ``DeleteRecordsRequest``), so the table can only say "a request"; the answer is that API's
#: response, or None when nothing is sent back (Produce with acks=0).
Handler = Callable[["RequestContext", Any], Awaitable["ApiMessage | None"]]


@dataclass(frozen=True)
class ApiSpec:
    """One Kafka API as minikafka serves it."""

    key: int
    name: str  # Kafka's name without "Request", e.g. "Produce"
    min_version: int
    max_version: int
    codec_module: str  # kafka-python module holding <name>Request and <name>Response
    handler_module: str  # module with ``async def handle(ctx, request)``

    # Loaded through the one quiet scope: kafka-python warns while it loads (see _kafka_codec).
    @cached_property
    def request(self) -> Any:
        return load_quietly(self.codec_module, f"{self.name}Request")

    @cached_property
    def response(self) -> Any:
        return load_quietly(self.codec_module, f"{self.name}Response")

    @cached_property
    def handler(self) -> Handler:
        handle: Handler = load_quietly(self.handler_module, "handle")
        return handle

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    @cached_property
    def _flexible_versions(self) -> frozenset[int]:
        return frozenset(v for v in range(self.min_version, self.max_version + 1)
                         if self.request.flexible_version_q(v))

    def flexible(self, version: int) -> bool:
        """Whether ``version`` (one this table serves) uses the flexible encodings."""
        return version in self._flexible_versions
