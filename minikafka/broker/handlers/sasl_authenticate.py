"""SaslAuthenticate (key 36): one SASL token each way after SaslHandshake v1.

Wrong credentials are answered with SASL_AUTHENTICATION_FAILED and a message, then the
connection is closed, as Kafka does. The session lifetime is 0: clients never re-authenticate.
"""

from __future__ import annotations

import logging
from typing import Any

from kafka.protocol.sasl import SaslAuthenticateRequest, SaslAuthenticateResponse

from minikafka.broker.context import CloseConnection, RequestContext
from minikafka.broker.sasl import SaslFailure, SaslSession, delay_close
from minikafka.errors import ErrorCode

log = logging.getLogger(__name__)


def _response(version: int, error: int, message: str | None, token: bytes = b"") -> SaslAuthenticateResponse:
    fields: dict[str, Any] = {"error_code": error, "error_message": message, "auth_bytes": token}
    if version >= 1:
        fields["session_lifetime_ms"] = 0
    return SaslAuthenticateResponse[version](**fields)


async def handle(ctx: RequestContext, request: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    version = ctx.api_version
    session = ctx.connection.sasl
    if session is None or session.state != SaslSession.AUTHENTICATE or session.raw_tokens:
        why = ("SaslAuthenticate request received after successful authentication"
               if session is None or session.complete else "SaslAuthenticate request received before SaslHandshake v1")
        return _response(version, ErrorCode.ILLEGAL_SASL_STATE, why)
    try:
        token = session.evaluate(bytes(request.auth_bytes or b""))
    except SaslFailure as exc:
        mechanism = session.server.mechanism if session.server else "?"
        log.warning("closing connection from %s: SASL %s authentication failed: %s", ctx.connection.peer,
                    mechanism, exc)
        ctx.connection.answer(ctx.header, _response(version, ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc)))
        await delay_close(ctx.services.config)
        raise CloseConnection("SASL authentication failed") from None
    if session.complete:
        log.info("%s authenticated as %s with %s on listener %s", ctx.connection.peer, session.principal,
                 session.server.mechanism if session.server else "?", session.listener.name)
    return _response(version, ErrorCode.NONE, None, token)
