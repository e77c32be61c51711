"""The admin endpoint of a cluster (``minikafka serve --brokers N --admin-port P``).

The same HTTP server, console and error answers as a single broker's (:mod:`.admin_http`), with
the cluster's routes, driving :class:`~minikafka.testkit.cluster_control.ClusterControl`::

    GET    /cluster                       brokers, controller, partitions (shape in admin_http's docstring)
    POST   /brokers/<id>/crash            stop broker <id> as a kill -9 would; the controller fences it
    POST   /brokers/<id>/start            start it again on its port and data dir
    POST   /brokers/<id>/restart          {"clean": true|false}: a controlled shutdown (or a crash), then a start
    POST   /brokers/<id>/shutdown         a controlled shutdown: leadership moves away, then a clean stop
    POST   /brokers/<id>/isolate          {"from": "clients"|"brokers"|"controller"|"all"} (default all)
    POST   /brokers/<id>/slow             {"ms": N}: answer each of its follower fetches N ms late
    POST   /brokers/<id>/heal             end its isolation and its slowing
    POST   /topics/<topic>/<p>/leader     {"broker": <id>}: move the leader to an active in-sync replica
    GET    /topics/<topic>/<p>            one partition as in /cluster
    GET    /topics                        {"topics": {name: partitions}}
    POST   /topics                        {"name", "partitions", "replication_factor", "config"}
    GET    /faults                        {"rules": [...]}: the cluster's fault rules, counts in total and by_broker
    POST   /faults                        a rule, a list, or {"rules": [...]} (``broker``: the node ids it
                                          applies on, every broker without it); 201 {"rules": [...]}
    GET    /faults/<id>, DELETE /faults/<id>, DELETE /faults    one rule, remove one, remove all
    GET    /status                        the cluster as a whole: bootstrap, each broker's state, topics
    GET    /health                        200 {"status": "up"} when every broker is up and active;
                                          503 "degraded" while some are, 503 "down" when none is
    GET    /partitions, /transactions, /groups, /, /ui, /events   the console's, for the whole cluster

The broker actions answer ``GET /cluster``'s body as it is afterwards. Routes that drive a single
broker (``/broker/*``, ``/cleaner/run``, ``/metrics``) answer 409 with what to use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from minikafka.testkit.admin_http import (
    FaultRoutes,
    HttpEndpoint,
    HttpError,
    Response,
    Routes,
    body_field,
    json_answer,
    unknown_is_404,
)

if TYPE_CHECKING:
    from minikafka.testkit.cluster_control import ClusterControl

BROKER_ACTIONS = ("crash", "start", "restart", "shutdown", "isolate", "slow", "heal")
#: the first part of the single-broker routes, which a cluster does not serve
_SINGLE_BROKER = {"broker": "/brokers/<id>/...", "cleaner": None, "metrics": None}


class ClusterAdminServer(FaultRoutes, HttpEndpoint):
    """``await ClusterAdminServer(control, host, port).start()``; ``port`` 0 picks a free port."""

    def __init__(self, control: ClusterControl, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(host, port)
        self.control = control

    def _routes(self, parts: list[str]) -> tuple[Routes, tuple[str, ...], tuple[Any, ...]]:
        routes, key, args = self._page_routes(parts)
        routes |= {
            ("health",): {"GET": self._health},
            ("status",): {"GET": self._status},
            ("cluster",): {"GET": self._cluster},
            ("topics",): {"GET": self._topics, "POST": self._create_topic},
            ("partitions",): {"GET": self._partitions},
            ("transactions",): {"GET": self._transactions},
            ("groups",): {"GET": self._groups},
        }
        if parts and parts[0] in _SINGLE_BROKER:
            instead = _SINGLE_BROKER[parts[0]]
            raise HttpError(409, f"/{parts[0]} drives a single broker; this is a cluster of "
                                 f"{self.control.cluster.size} brokers" + (f": use {instead}" if instead else ""))
        key, args = self._fault_routes(parts, routes, key, args)
        if len(parts) == 3 and parts[0] == "brokers" and parts[2] in BROKER_ACTIONS:
            key, args = ("brokers", "<id>", parts[2]), (_number(parts[1], "broker id"), parts[2])
            routes[key] = {"POST": self._broker_action}
        elif len(parts) == 3 and parts[0] == "topics":
            key, args = ("topics", "<name>", "<partition>"), (parts[1], _number(parts[2], "partition"))
            routes[key] = {"GET": self._partition}
        elif len(parts) == 4 and parts[0] == "topics" and parts[3] == "leader":
            key, args = ("topics", "<name>", "<partition>", "leader"), (parts[1], _number(parts[2], "partition"))
            routes[key] = {"POST": self._move_leader}
        return routes, key, args

    # ----------------------------------------------------------------- the cluster
    async def _health(self, _body: Any) -> Response:
        states = self.control.status()["brokers"]
        up = [n for n, state in states.items() if state != "fenced"]
        status = "up" if self.control.running else "degraded" if up else "down"
        return json_answer(200 if status == "up" else 503, {"status": status, "brokers": states,
                                                      "bootstrap": self.control.cluster.bootstrap})

    async def _status(self, _body: Any) -> Response:
        return json_answer(200, self.control.status())

    async def _cluster(self, _body: Any) -> Response:
        return json_answer(200, self.control.describe())

    async def _snapshot(self) -> dict[str, Any]:
        return {**self.control.snapshot(), "cluster": self.control.describe()}

    # ----------------------------------------------------------------- brokers
    async def _broker_action(self, body: Any, node_id: int, action: str) -> Response:
        """``POST /brokers/<id>/<action>``; answers the cluster as it is afterwards."""
        control = self.control
        with unknown_is_404():
            if action == "crash":
                await control.crash(node_id)
            elif action == "start":
                await control.start(node_id)
            elif action == "restart":
                await control.restart(node_id, clean=body_field(body, "clean", bool, True))
            elif action == "shutdown":
                await control.shutdown(node_id)
            elif action == "isolate":
                control.isolate(node_id, body_field(body, "from", str, "all"))
            elif action == "slow":
                ms = body_field(body, "ms", int, None)
                if ms is None:
                    raise HttpError(400, 'give the delay as {"ms": <milliseconds>}')
                await control.slow(node_id, ms)
            else:
                control.heal(node_id)
        return await self._cluster(None)

    # ----------------------------------------------------------------- topics and partitions
    async def _move_leader(self, body: Any, topic: str, partition: int) -> Response:
        node_id = body_field(body, "broker", int, None)
        if node_id is None:
            raise HttpError(400, 'give the new leader as {"broker": <id>}')
        with unknown_is_404():
            return json_answer(200, self.control.move_leader(topic, partition, node_id))

    async def _partition(self, _body: Any, topic: str, partition: int) -> Response:
        with unknown_is_404():
            return json_answer(200, self.control.partition(topic, partition))

    async def _topics(self, _body: Any) -> Response:
        return json_answer(200, {"topics": self.control.topics()})

    async def _create_topic(self, body: Any) -> Response:
        name = body_field(body, "name", str, None)
        if not name:
            raise HttpError(400, "a topic needs a name")
        self.control.create_topic(name, body_field(body, "partitions", int, None),
                                  body_field(body, "replication_factor", int, None), body_field(body, "config", dict, None))
        return json_answer(201, {"name": name, "partitions": self.control.topics().get(name)})

    async def _partitions(self, _body: Any) -> Response:
        return json_answer(200, {"partitions": self.control.console_partitions()})

    async def _transactions(self, _body: Any) -> Response:
        return json_answer(200, {"transactions": self.control.snapshot()["transactions"]})

    async def _groups(self, _body: Any) -> Response:
        return json_answer(200, {"groups": self.control.snapshot()["groups"]})


def _number(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise HttpError(400, f"{what} must be a number, not {text!r}") from None
