"""The API table entry type: which request/response classes and versions an API key has.

The table itself lives with the handlers (:mod:`minikafka.broker.dispatch`); this module only
knows about the codec.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

Handler = Callable[[Any, Any], Awaitable[Any]]


@dataclass(frozen=True)
class ApiSpec:
    """One Kafka API as minikafka serves it."""

    request: Any  # kafka.protocol ApiMessage subclass
    response: Any
    min_version: int
    max_version: int
    handler: Handler

    @property
    def key(self) -> int:
        return int(self.request.API_KEY)

    @property
    def name(self) -> str:
        return str(self.request.name).removesuffix("Request")

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def flexible(self, version: int) -> bool:
        return bool(self.request.flexible_version_q(version))
