"""The one hook through which something outside the broker sees its requests.

``Broker.interceptor``, when set, is handed every decoded request instead of the handler and
decides what happens: call ``spec.handler(ctx, request)`` and return (or change) its answer,
answer without it, wait, or raise :class:`~minikafka.broker.context.CloseConnection`. The test
kit's fault rules (:mod:`minikafka.testkit.faults`) are the interceptor of a broker under test; a
broker in production has none and pays one ``is None`` check per request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from minikafka.broker.context import RequestContext
from minikafka.broker.dispatch import ApiSpec

if TYPE_CHECKING:
    from kafka.protocol.api_message import ApiMessage


class RequestInterceptor(Protocol):
    async def dispatch(self, spec: ApiSpec, ctx: RequestContext, request: Any) -> ApiMessage | None:
        """Answer ``request`` (usually through ``spec.handler``); None means no response."""
        ...
