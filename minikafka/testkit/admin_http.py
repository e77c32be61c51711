"""The admin endpoint: fault rules, lifecycle and ``/metrics`` over plain HTTP/1.1 with JSON.

It runs on the broker's event loop, on a port of its own (``--admin-port``), so a test in any
language can drive a broker in a container with nothing but an HTTP client::

    GET    /health                     200 {"status": "up"} or 503 {"status": "down"}
    GET    /metrics                    Prometheus text format
    GET    /status                     bootstrap, running, topics, crash/restart counts
    GET    /faults                     {"rules": [...]} with matched/fired counts
    POST   /faults                     add a rule, a list, or {"rules": [...]}; 201 {"rules": [...]}
    GET    /faults/<id>                one rule
    DELETE /faults/<id>                remove one rule
    DELETE /faults                     remove all rules
    POST   /broker/crash               stop as a crash would (no flush, snapshot, clean marker)
    POST   /broker/start               start again after a crash or stop
    POST   /broker/restart             {"clean": true|false}; default true
    POST   /broker/roll                {"topic": ..., "partition": ...} (both optional)
    POST   /broker/expire-producers    {"topic": ..., "partition": ...} (both optional)
    POST   /topics                     {"name": ..., "partitions": 1, "config": {...}}
    GET    /topics/<name>/<partition>  offsets and producer state of one partition
    GET    /transactions               every transactional id: state, producer id/epoch, partitions

It lives outside the broker's start/stop, so it keeps answering while the broker is crashed.
Bad requests get a 4xx answer with ``{"error": ...}``; nothing a client sends stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import unquote, urlsplit

from minikafka.broker import prometheus
from minikafka.errors import KafkaError
from minikafka.startup_errors import BindError, bind_reason
from minikafka.testkit.control import BrokerControl
from minikafka.testkit.faults import FaultRuleError, rule_specs

log = logging.getLogger("minikafka.admin")

MAX_BODY = 1 << 20
MAX_HEADER_LINE = 8192
MAX_HEADERS = 100
IDLE_TIMEOUT = 60.0
JSON_TYPE = "application/json"
_REASONS = {200: "OK", 201: "Created", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            408: "Request Timeout", 409: "Conflict", 411: "Length Required", 413: "Payload Too Large",
            500: "Internal Server Error", 503: "Service Unavailable"}


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


Response = tuple[int, str, bytes]


def _json(status: int, body: Any) -> Response:
    return status, JSON_TYPE, (json.dumps(body, sort_keys=True) + "\n").encode()


class AdminServer:
    """``await AdminServer(control, host, port).start()``; ``port`` 0 picks a free port."""

    def __init__(self, control: BrokerControl, host: str = "127.0.0.1", port: int = 0) -> None:
        self.control = control
        self.host = host
        self.port = port
        self._server: asyncio.base_events.Server | None = None
        self._clients: set[asyncio.Task[Any]] = set()

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "", "::") else self.host
        return f"http://{host}:{self.port}"

    async def start(self) -> AdminServer:
        try:
            self._server = await asyncio.start_server(self._serve, self.host, self.port, reuse_address=True)
        except OSError as exc:
            raise BindError("admin endpoint", self.host, self.port, bind_reason(exc)) from exc
        bound = self._server.sockets[0].getsockname()
        self.port = bound[1]
        log.info("admin endpoint listening on %s:%d (%s)", bound[0], self.port, self.url)
        return self

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for task in list(self._clients):
            task.cancel()
        if self._clients:
            await asyncio.gather(*self._clients, return_exceptions=True)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 1)
        self._server = None

    # ----------------------------------------------------------------- HTTP
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._clients.add(task)
        try:
            keep_alive = True
            while keep_alive:
                try:
                    request = await asyncio.wait_for(self._read_request(reader), IDLE_TIMEOUT)
                except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
                    return
                except (HttpError, ValueError) as exc:  # ValueError: a line beyond the reader's limit
                    status = exc.status if isinstance(exc, HttpError) else 400
                    self._write(writer, *_json(status, {"error": str(exc)}), keep_alive=False)
                    await writer.drain()
                    return
                if request is None:
                    return
                method, target, headers, body = request
                keep_alive = headers.get("connection", "").lower() != "close"
                try:
                    response = await self._route(method, target, body)
                except HttpError as exc:
                    response = _json(exc.status, {"error": str(exc)})
                except (FaultRuleError, KafkaError, ValueError, KeyError, TypeError) as exc:
                    response = _json(400, {"error": str(exc) or type(exc).__name__})
                except RuntimeError as exc:  # e.g. the broker is not running
                    response = _json(409, {"error": str(exc)})
                except Exception as exc:
                    log.exception("admin request %s %s failed", method, target)
                    response = _json(500, {"error": f"{type(exc).__name__}: {exc}"})
                self._write(writer, *response, keep_alive=keep_alive, head_only=method == "HEAD")
                await writer.drain()
        except asyncio.CancelledError:
            pass
        except (ConnectionError, OSError):
            pass
        finally:
            if task is not None:
                self._clients.discard(task)
            writer.close()

    async def _read_request(self, reader: asyncio.StreamReader) -> tuple[str, str, dict[str, str], bytes] | None:
        line = await reader.readline()
        if not line:
            return None
        if len(line) > MAX_HEADER_LINE or not line.endswith(b"\n"):
            raise HttpError(400, "request line too long")
        parts = line.decode("latin-1").split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise HttpError(400, "malformed request line")
        method, target, version = parts
        headers: dict[str, str] = {}
        for _ in range(MAX_HEADERS + 1):
            raw = await reader.readline()
            if len(raw) > MAX_HEADER_LINE:
                raise HttpError(400, "header line too long")
            if raw in (b"\r\n", b"\n", b""):
                break
            name, sep, value = raw.decode("latin-1").partition(":")
            if not sep:
                raise HttpError(400, "malformed header")
            headers[name.strip().lower()] = value.strip()
        else:
            raise HttpError(400, "too many headers")
        if version == "HTTP/1.0" and headers.get("connection", "").lower() != "keep-alive":
            headers["connection"] = "close"
        if "chunked" in headers.get("transfer-encoding", "").lower():
            raise HttpError(411, "send a Content-Length, not a chunked body")
        try:
            length = int(headers.get("content-length", "0"))
        except ValueError:
            raise HttpError(400, "bad Content-Length") from None
        if length < 0:
            raise HttpError(400, "bad Content-Length")
        if length > MAX_BODY:
            raise HttpError(413, f"body larger than {MAX_BODY} bytes")
        body = await reader.readexactly(length) if length else b""
        return method.upper(), target, headers, body

    def _write(self, writer: asyncio.StreamWriter, status: int, content_type: str, body: bytes,
               keep_alive: bool, head_only: bool = False) -> None:
        head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}\r\n"
                f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
                f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n")
        writer.write(head.encode("latin-1") + (b"" if head_only else body))  # HEAD: GET's headers, no body

    # ----------------------------------------------------------------- routes
    async def _route(self, method: str, target: str, body: bytes) -> Response:
        path = unquote(urlsplit(target).path).rstrip("/") or "/"
        parts = [p for p in path.split("/") if p]
        routes: dict[tuple[str, ...], dict[str, Callable[..., Awaitable[Response]]]] = {
            ("health",): {"GET": self._health},
            ("metrics",): {"GET": self._metrics},
            ("status",): {"GET": self._status},
            ("faults",): {"GET": self._list_rules, "POST": self._add_rules, "DELETE": self._clear_rules},
            ("broker", "crash"): {"POST": self._crash},
            ("broker", "start"): {"POST": self._start},
            ("broker", "restart"): {"POST": self._restart},
            ("broker", "roll"): {"POST": self._roll},
            ("broker", "expire-producers"): {"POST": self._expire},
            ("topics",): {"GET": self._topics, "POST": self._create_topic},
            ("transactions",): {"GET": self._transactions},
        }
        key = tuple(parts)
        args: tuple[Any, ...] = ()
        if len(parts) == 2 and parts[0] == "faults":
            key, args = ("faults", "<id>"), (parts[1],)
            routes[key] = {"GET": self._get_rule, "DELETE": self._remove_rule}
        elif len(parts) == 3 and parts[0] == "topics":
            key, args = ("topics", "<name>", "<partition>"), (parts[1], parts[2])
            routes[key] = {"GET": self._partition}
        methods = routes.get(key)
        if methods is None:
            raise HttpError(404, f"no such endpoint: {path}")
        handler = methods.get("GET" if method == "HEAD" else method)  # HEAD answers as GET, without the body
        if handler is None:
            raise HttpError(405, f"{method} not allowed on {path}; use {', '.join(methods)}")
        return await handler(_parse_body(body), *args)

    async def _health(self, _body: Any) -> Response:
        up = self.control.running
        return _json(200 if up else 503, {"status": "up" if up else "down", "bootstrap": self.control.broker.bootstrap})

    async def _metrics(self, _body: Any) -> Response:
        text = self.control.metrics_text()
        return 200, prometheus.CONTENT_TYPE, text.encode()

    async def _status(self, _body: Any) -> Response:
        return _json(200, self.control.status())

    async def _list_rules(self, _body: Any) -> Response:
        return _json(200, {"rules": [r.to_dict() for r in self.control.faults.rules]})

    async def _add_rules(self, body: Any) -> Response:
        added = self.control.faults.add_all(rule_specs(body))
        return _json(201, {"rules": [r.to_dict() for r in added]})

    async def _clear_rules(self, _body: Any) -> Response:
        return _json(200, {"removed": self.control.faults.clear()})

    async def _get_rule(self, _body: Any, rule_id: str) -> Response:
        rule = self.control.faults.get(rule_id)
        if rule is None:
            raise HttpError(404, f"no rule {rule_id!r}")
        return _json(200, rule.to_dict())

    async def _remove_rule(self, _body: Any, rule_id: str) -> Response:
        if not self.control.faults.remove(rule_id):
            raise HttpError(404, f"no rule {rule_id!r}")
        return _json(200, {"removed": 1})

    async def _crash(self, _body: Any) -> Response:
        await self.control.crash()
        return _json(200, self.control.status())

    async def _start(self, _body: Any) -> Response:
        await self.control.start()
        return _json(200, self.control.status())

    async def _restart(self, body: Any) -> Response:
        clean = _field(body, "clean", bool, True)
        await self.control.restart(clean=clean)
        return _json(200, self.control.status())

    async def _roll(self, body: Any) -> Response:
        try:
            rolled = self.control.roll_segments(_field(body, "topic", str, None),
                                                _field(body, "partition", int, None))
        except KeyError as exc:
            raise HttpError(404, str(exc.args[0])) from None
        return _json(200, {"rolled": rolled})

    async def _expire(self, body: Any) -> Response:
        try:
            count = self.control.expire_producers(_field(body, "topic", str, None),
                                                  _field(body, "partition", int, None))
        except KeyError as exc:
            raise HttpError(404, str(exc.args[0])) from None
        return _json(200, {"expired": count})

    async def _topics(self, _body: Any) -> Response:
        return _json(200, {"topics": self.control.topics()})

    async def _transactions(self, _body: Any) -> Response:
        return _json(200, {"transactions": self.control.transactions()})

    async def _create_topic(self, body: Any) -> Response:
        name = _field(body, "name", str, None)
        if not name:
            raise HttpError(400, "a topic needs a name")
        config = _field(body, "config", dict, None)
        self.control.create_topic(name, _field(body, "partitions", int, None), config)  # None: num.partitions
        return _json(201, {"name": name, "partitions": self.control.topics().get(name)})

    async def _partition(self, _body: Any, topic: str, partition: str) -> Response:
        try:
            number = int(partition)
        except ValueError:
            raise HttpError(400, f"partition must be a number, not {partition!r}") from None
        try:
            return _json(200, self.control.partition_state(topic, number))
        except KeyError as exc:
            raise HttpError(404, str(exc.args[0])) from None


def _parse_body(body: bytes) -> Any:
    if not body.strip():
        return None
    try:
        return json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise HttpError(400, f"body is not JSON: {exc}") from None


def _field(body: Any, name: str, kind: type, default: Any) -> Any:
    if body is None:
        return default
    if not isinstance(body, dict):
        raise HttpError(400, "body must be a JSON object")
    value = body.get(name, default)
    if value is None:
        return default
    if kind is int and isinstance(value, bool) or not isinstance(value, kind):
        raise HttpError(400, f"{name} must be {kind.__name__}, got {value!r}")
    return value
