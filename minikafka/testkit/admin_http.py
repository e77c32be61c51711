"""The admin endpoint: fault rules, lifecycle and ``/metrics`` over HTTP with JSON.

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
    POST   /cleaner/run                run the log cleaner until nothing qualifies; {"roll": true,
                                       "topic": ..., "partition": ...} rolls those first (all optional)
    POST   /topics                     {"name": ..., "partitions": 1, "config": {...}}
    GET    /topics/<name>/<partition>  offsets and producer state of one partition
    GET    /transactions               every transactional id: state, producer id/epoch, partitions
    GET    /partitions                 every partition: leader, replicas, offsets, segments, producers
    GET    /groups                     consumer groups: members, assignment, committed offsets, lag
    GET    / or /ui                    the live console, a page in the browser (docs/console.md)
    GET    /events                     the console's snapshot as server-sent events, while subscribed

Served once the broker runs as a cluster (the console shows it when it answers 200)::

    GET    /cluster                    {"controller": 1, "brokers": [{"id", "host", "port", "rack",
                                        "state": "active"|"controlled-shutdown"|"fenced",
                                        "isolated": "none"|"clients"|"brokers"|"controller"|"all"}],
                                        "partitions": [{"topic", "partition", "leader", "leader_epoch",
                                        "replicas", "isr", "offline", "high_watermark",
                                        "replica_offsets": [{"broker", "log_start_offset",
                                        "log_end_offset"}]}]}

It lives outside the broker's start/stop, so it keeps answering while the broker is crashed.
Bad requests get a 4xx answer with ``{"error": ...}``; nothing a client sends stops it. HEAD
answers every GET route with its status and headers and no body.

HTTP itself (parsing, keep-alive, HEAD, limits, chunked bodies) is aiohttp's: a well-kept asyncio
server that runs on the broker's own event loop (uvloop included) with no thread and no extra
process. It costs ~0.2 s to import, so only ``--admin-port`` (or ``MiniKafka(admin_port=...)``)
imports this module.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Self

from aiohttp import HttpVersion11, web

from minikafka.broker import prometheus
from minikafka.errors import KafkaError
from minikafka.startup_errors import BindError, bind_reason
from minikafka.testkit.console import views
from minikafka.testkit.console.assets import asset
from minikafka.testkit.console.feed import LiveFeed
from minikafka.testkit.control import BrokerControl
from minikafka.testkit.faults import FaultRuleError, rule_specs

if TYPE_CHECKING:
    from aiohttp.abc import AbstractStreamWriter
    from aiohttp.http_parser import RawRequestMessage
    from aiohttp.streams import StreamReader
    from aiohttp.web_protocol import RequestHandler

log = logging.getLogger(__name__)

MAX_BODY = 1 << 20
IDLE_TIMEOUT = 60.0
#: how long a stop waits for admin requests in progress (a held /broker/restart, say)
STOP_TIMEOUT = 0.5
JSON_TYPE = "application/json"


class _ProtocolLog(logging.LoggerAdapter):
    """aiohttp's log of connections: a request it cannot parse (garbage, no Host header, a line too
    long) is a client's mistake, already answered 400, so it is logged at debug, not as an error
    with a traceback. The endpoint's own failures are logged by :meth:`AdminServer._handle`."""

    def exception(self, msg: object, *args: Any, exc_info: Any = True, **kwargs: Any) -> None:
        self.debug(msg, *args, exc_info=exc_info, **kwargs)


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


Response = tuple[int, str, bytes]
Routes = dict[tuple[str, ...], dict[str, Callable[..., Awaitable[Response]]]]


def json_answer(status: int, body: Any) -> Response:
    return status, JSON_TYPE, (json.dumps(body, sort_keys=True) + "\n").encode()


class HttpEndpoint:
    """The HTTP side shared by a broker's endpoint (:class:`AdminServer`) and a cluster's
    (:class:`~minikafka.testkit.cluster_admin_http.ClusterAdminServer`): listening, answering
    JSON, the console's page and its live feed. A subclass names its routes (:meth:`_routes`)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self._runner: web.ServerRunner | None = None
        self.feed = LiveFeed(self._snapshot)

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "", "::") else self.host
        return f"http://{host}:{self.port}"

    async def start(self) -> Self:
        server = web.Server(self._handle, request_factory=_request_factory, access_log=None,
                            keepalive_timeout=IDLE_TIMEOUT, logger=_ProtocolLog(log, {}))
        runner = web.ServerRunner(server, shutdown_timeout=STOP_TIMEOUT)
        await runner.setup()
        try:
            await web.TCPSite(runner, self.host, self.port, reuse_address=True).start()
        except OSError as exc:
            await runner.cleanup()
            raise BindError("admin endpoint", self.host, self.port, bind_reason(exc)) from exc
        self._runner = runner
        bound = runner.addresses[0]
        self.port = bound[1]
        log.info("admin endpoint listening on %s:%d (%s)", bound[0], self.port, self.url)
        return self

    async def stop(self) -> None:
        if self._runner is None:
            return
        runner, self._runner = self._runner, None
        await self.feed.close()  # open pages' streams end now, not after the stop timeout
        await runner.cleanup()

    # ----------------------------------------------------------------- HTTP
    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        """One request: route it, answer JSON (errors as ``{"error": ...}`` with their status)."""
        if request.path == "/events" and request.method == "GET":
            return await self.feed.stream(request)  # a stream, not one answer
        try:
            status, content_type, data = await self._route(request.method, request.path, await request.read())
        except web.HTTPException as exc:  # aiohttp's own: 413 for a body over MAX_BODY
            status, content_type, data = json_answer(exc.status, {"error": exc.text or exc.reason})
        except HttpError as exc:
            status, content_type, data = json_answer(exc.status, {"error": str(exc)})
        except (FaultRuleError, KafkaError, ValueError, KeyError, TypeError) as exc:
            status, content_type, data = json_answer(400, {"error": str(exc) or type(exc).__name__})
        except RuntimeError as exc:  # e.g. the broker is not running
            status, content_type, data = json_answer(409, {"error": str(exc)})
        except Exception as exc:
            log.exception("admin request %s %s failed", request.method, request.path)
            status, content_type, data = json_answer(500, {"error": f"{type(exc).__name__}: {exc}"})
        # HEAD: aiohttp sends GET's headers (Content-Length included) and leaves the body out
        return web.Response(status=status, body=data, headers={"Content-Type": content_type})

    # ----------------------------------------------------------------- routes
    async def _route(self, method: str, path: str, body: bytes) -> Response:
        path = path.rstrip("/") or "/"
        parts = [p for p in path.split("/") if p]
        routes, key, args = self._routes(parts)
        methods = routes.get(key)
        if methods is None:
            raise HttpError(404, f"no such endpoint: {path}")
        handler = methods.get("GET" if method == "HEAD" else method)  # HEAD answers as GET, without the body
        if handler is None:
            raise HttpError(405, f"{method} not allowed on {path}; use {', '.join(methods)}")
        return await handler(_parse_body(body), *args)

    def _routes(self, parts: list[str]) -> tuple[Routes, tuple[str, ...], tuple[Any, ...]]:
        """The route table, the key ``parts`` match in it and the arguments taken from the path."""
        raise NotImplementedError

    def _page_routes(self, parts: list[str]) -> tuple[Routes, tuple[str, ...], tuple[Any, ...]]:
        """The console's routes, which every endpoint serves."""
        routes: Routes = {
            ("events",): {"GET": self._events_head},  # GET itself is a stream (see _handle): HEAD only
            (): {"GET": self._page},
            ("ui",): {"GET": self._page},
        }
        if len(parts) == 2 and parts[0] == "ui":
            routes[("ui", "<file>")] = {"GET": self._asset}
            return routes, ("ui", "<file>"), (parts[1],)
        return routes, tuple(parts), ()

    async def _snapshot(self) -> dict[str, Any]:
        raise NotImplementedError

    async def _events_head(self, _body: Any) -> Response:
        return 200, "text/event-stream", b""

    async def _page(self, _body: Any) -> Response:
        return await self._asset(None, "index.html")

    async def _asset(self, _body: Any, name: str) -> Response:
        found = asset(name)
        if found is None:
            raise HttpError(404, f"no such file: /ui/{name}")
        return 200, *found


class FaultRoutes:
    """``/faults`` and ``/faults/<id>`` over ``control.faults``: a broker's
    :class:`~minikafka.testkit.faults.FaultInjector` or a cluster's ``FaultRuleSet``."""

    control: Any

    def _fault_routes(self, parts: list[str], routes: Routes, key: tuple[str, ...],
                      args: tuple[Any, ...]) -> tuple[tuple[str, ...], tuple[Any, ...]]:
        """Adds the routes to ``routes``; the key and arguments of ``/faults/<id>`` when that is the path."""
        routes[("faults",)] = {"GET": self._list_rules, "POST": self._add_rules, "DELETE": self._clear_rules}
        if len(parts) == 2 and parts[0] == "faults":
            key, args = ("faults", "<id>"), (parts[1],)
            routes[key] = {"GET": self._get_rule, "DELETE": self._remove_rule}
        return key, args

    async def _list_rules(self, _body: Any) -> Response:
        return json_answer(200, {"rules": [r.to_dict() for r in self.control.faults.rules]})

    async def _add_rules(self, body: Any) -> Response:
        added = self.control.faults.add_all(rule_specs(body))
        return json_answer(201, {"rules": [r.to_dict() for r in added]})

    async def _clear_rules(self, _body: Any) -> Response:
        return json_answer(200, {"removed": self.control.faults.clear()})

    async def _get_rule(self, _body: Any, rule_id: str) -> Response:
        rule = self.control.faults.get(rule_id)
        if rule is None:
            raise HttpError(404, f"no rule {rule_id!r}")
        return json_answer(200, rule.to_dict())

    async def _remove_rule(self, _body: Any, rule_id: str) -> Response:
        if not self.control.faults.remove(rule_id):
            raise HttpError(404, f"no rule {rule_id!r}")
        return json_answer(200, {"removed": 1})


class AdminServer(FaultRoutes, HttpEndpoint):
    """``await AdminServer(control, host, port).start()``; ``port`` 0 picks a free port."""

    def __init__(self, control: BrokerControl, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(host, port)
        self.control = control

    def _routes(self, parts: list[str]) -> tuple[Routes, tuple[str, ...], tuple[Any, ...]]:
        routes, key, args = self._page_routes(parts)
        routes |= {
            ("health",): {"GET": self._health},
            ("metrics",): {"GET": self._metrics},
            ("status",): {"GET": self._status},
            ("broker", "crash"): {"POST": self._crash},
            ("broker", "start"): {"POST": self._start},
            ("broker", "restart"): {"POST": self._restart},
            ("broker", "roll"): {"POST": self._roll},
            ("broker", "expire-producers"): {"POST": self._expire},
            ("cleaner", "run"): {"POST": self._clean},
            ("topics",): {"GET": self._topics, "POST": self._create_topic},
            ("transactions",): {"GET": self._transactions},
            ("partitions",): {"GET": self._partitions},
            ("groups",): {"GET": self._groups},
        }
        key, args = self._fault_routes(parts, routes, key, args)
        if len(parts) == 3 and parts[0] == "topics":
            key, args = ("topics", "<name>", "<partition>"), (parts[1], parts[2])
            routes[key] = {"GET": self._partition}
        return routes, key, args

    async def _health(self, _body: Any) -> Response:
        up = self.control.running
        return json_answer(200 if up else 503, {"status": "up" if up else "down", "bootstrap": self.control.broker.bootstrap})

    async def _metrics(self, _body: Any) -> Response:
        text = self.control.metrics_text()
        return 200, prometheus.CONTENT_TYPE, text.encode()

    async def _status(self, _body: Any) -> Response:
        return json_answer(200, self.control.status())

    async def _crash(self, _body: Any) -> Response:
        await self.control.crash()
        return json_answer(200, self.control.status())

    async def _start(self, _body: Any) -> Response:
        await self.control.start()
        return json_answer(200, self.control.status())

    async def _restart(self, body: Any) -> Response:
        clean = body_field(body, "clean", bool, True)
        await self.control.restart(clean=clean)
        return json_answer(200, self.control.status())

    async def _roll(self, body: Any) -> Response:
        with unknown_is_404():
            rolled = self.control.roll_segments(*_topic_partition(body))
        return json_answer(200, {"rolled": rolled})

    async def _expire(self, body: Any) -> Response:
        with unknown_is_404():
            count = self.control.expire_producers(*_topic_partition(body))
        return json_answer(200, {"expired": count})

    async def _clean(self, body: Any) -> Response:
        with unknown_is_404():
            done = await self.control.clean_logs(body_field(body, "roll", bool, False), *_topic_partition(body))
        return json_answer(200, done)

    async def _topics(self, _body: Any) -> Response:
        return json_answer(200, {"topics": self.control.topics()})

    async def _transactions(self, _body: Any) -> Response:
        return json_answer(200, {"transactions": self.control.transactions()})

    async def _partitions(self, _body: Any) -> Response:
        return json_answer(200, {"partitions": views.partitions(self.control)})

    async def _groups(self, _body: Any) -> Response:
        return json_answer(200, {"groups": views.groups(self.control)})

    async def _snapshot(self) -> dict[str, Any]:
        """The console's snapshot, with ``GET /cluster``'s body when that route answers (None on 404)."""
        snapshot = views.snapshot(self.control)
        try:
            status, _type, data = await self._route("GET", "/cluster", b"")
        except HttpError:
            status = 404
        snapshot["cluster"] = json.loads(data) if status == 200 else None
        return snapshot

    async def _create_topic(self, body: Any) -> Response:
        name = body_field(body, "name", str, None)
        if not name:
            raise HttpError(400, "a topic needs a name")
        config = body_field(body, "config", dict, None)
        self.control.create_topic(name, body_field(body, "partitions", int, None), config)  # None: num.partitions
        return json_answer(201, {"name": name, "partitions": self.control.topics().get(name)})

    async def _partition(self, _body: Any, topic: str, partition: str) -> Response:
        try:
            number = int(partition)
        except ValueError:
            raise HttpError(400, f"partition must be a number, not {partition!r}") from None
        with unknown_is_404():
            return json_answer(200, self.control.partition_state(topic, number))


def _request_factory(message: RawRequestMessage, payload: StreamReader, protocol: RequestHandler,
                     writer: AbstractStreamWriter, task: asyncio.Task[None]) -> web.BaseRequest:
    """aiohttp's request, answered as HTTP/1.1 whatever the client spoke, as HTTP allows.

    aiohttp echoes the request's version in the status line, and says HTTP/1.0 for a request it
    could not parse (no version read); the endpoint has always answered HTTP/1.1. Keep-alive
    follows the request (HTTP/1.0 without ``Connection: keep-alive`` still closes), and every
    answer has a Content-Length, so the version changes nothing else.
    """
    if message.version < HttpVersion11:
        message = message._replace(version=HttpVersion11)
    return web.BaseRequest(message, payload, protocol, writer, task, asyncio.get_running_loop(),
                           client_max_size=MAX_BODY)


def _parse_body(body: bytes) -> Any:
    if not body.strip():
        return None
    try:
        return json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise HttpError(400, f"body is not JSON: {exc}") from None


@contextmanager
def unknown_is_404() -> Iterator[None]:
    """The control's KeyError for an unknown topic or partition answers 404 with its message."""
    try:
        yield
    except KeyError as exc:
        raise HttpError(404, str(exc.args[0])) from None


def _topic_partition(body: Any) -> tuple[str | None, int | None]:
    """The optional ``topic`` and ``partition`` a control action is limited to (None: all)."""
    return body_field(body, "topic", str, None), body_field(body, "partition", int, None)


def body_field(body: Any, name: str, kind: type, default: Any) -> Any:
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
