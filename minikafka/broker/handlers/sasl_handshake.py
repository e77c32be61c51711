"""SaslHandshake (key 17): the client names its SASL mechanism (see :mod:`minikafka.broker.sasl`).

On a listener without SASL, or once the connection is authenticated, Kafka answers
ILLEGAL_SASL_STATE and keeps the connection. An unsupported mechanism is answered with
UNSUPPORTED_SASL_MECHANISM and the enabled mechanisms, then the connection is closed.
"""

from __future__ import annotations

import logging

from kafka.protocol.sasl import SaslHandshakeRequest, SaslHandshakeResponse

from minikafka.broker.context import CloseConnection, RequestContext
from minikafka.broker.sasl import SaslSession, delay_close
from minikafka.errors import ErrorCode

log = logging.getLogger(__name__)


async def handle(ctx: RequestContext, request: SaslHandshakeRequest) -> SaslHandshakeResponse:
    Response = SaslHandshakeResponse[ctx.api_version]
    session = ctx.connection.sasl
    if session is None or session.state != SaslSession.HANDSHAKE:
        return Response(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    enabled = list(session.listener.sasl_mechanisms)
    mechanism = request.mechanism
    if mechanism not in enabled:
        log.warning("closing connection from %s: SASL mechanism %r is not enabled on listener %s (enabled: %s)",
                    ctx.connection.peer, mechanism, session.listener.name, ", ".join(enabled))
        ctx.connection.answer(ctx.header, Response(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled))
        await delay_close(ctx.services.config)
        raise CloseConnection(f"unsupported SASL mechanism {mechanism!r}")
    session.begin(mechanism, ctx.api_version)
    return Response(error_code=ErrorCode.NONE, mechanisms=enabled)
