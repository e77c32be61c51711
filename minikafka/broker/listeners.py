"""Listeners in Kafka's form: ``listeners``, ``advertised.listeners``, ``listener.security.protocol.map``.

A listener is a name, an address to bind and a security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT
or SASL_SSL). ``listeners=PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093`` serves both side
by side. Metadata answers with the advertised address of the listener the request came in on,
as Kafka does, so a client that bootstrapped through the SASL_SSL port stays on it.

Without a ``listeners`` setting the broker has exactly one PLAINTEXT listener on ``--host`` /
``--port`` (advertised as ``--advertised-host`` / ``--advertised-port``), as before listeners
existed.

Settings can be given per listener with Kafka's prefix: ``listener.name.sasl_ssl.ssl.keystore.location``
overrides ``ssl.keystore.location`` for the listener named SASL_SSL.
"""

from __future__ import annotations

import functools
import os
import re
import ssl
import tempfile
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from minikafka.broker.acceptor import Acceptor, bind_sockets
from minikafka.config import BrokerConfig, list_setting
from minikafka.startup_errors import BindError, ConfigError, KeyMaterialError, bind_reason

PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
_ENDPOINT = re.compile(r"^(?P<name>[A-Za-z0-9_]+)://(?P<host>\[[0-9A-Fa-f:.]+\]|[^:/\s]*):(?P<port>\d+)$")


class ListenerConfigError(ConfigError):
    """A listener setting that cannot work: the broker refuses to start rather than guess."""


class ListenerKeyMaterialError(ListenerConfigError, KeyMaterialError):
    """A TLS listener whose key store or trust store is missing or cannot be loaded."""

    exit_code = KeyMaterialError.exit_code


@dataclass
class Listener:
    """One listener: where it binds, what it advertises, and how clients must authenticate."""

    name: str
    security_protocol: str
    host: str
    port: int
    advertised_host: str | None = None
    advertised_port: int | None = None
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanisms: tuple[str, ...] = ()
    settings: dict[str, Any] = field(default_factory=dict)  # this listener's view of the broker settings

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def endpoint_host(self) -> str:
        """The host clients are told to connect to."""
        host = self.advertised_host or self.host
        return "127.0.0.1" if host in ("0.0.0.0", "", "::") else host

    @property
    def endpoint_port(self) -> int:
        return self.advertised_port or self.port

    @property
    def bootstrap(self) -> str:
        return f"{self.endpoint_host}:{self.endpoint_port}"


def listener_setting(config: BrokerConfig, listener_name: str, key: str) -> Any:
    """``listener.name.<name>.<key>`` if set, else the broker-wide ``key``."""
    prefixed = f"listener.name.{listener_name.lower()}.{key}"
    if prefixed in config.settings:
        return config.settings[prefixed]
    return config.get(key)


def _parse_endpoints(text: str, setting: str) -> list[tuple[str, str, int]]:
    out: list[tuple[str, str, int]] = []
    for item in list_setting(text):
        match = _ENDPOINT.match(item)
        if match is None:
            raise ListenerConfigError(f"{setting}: {item!r} is not NAME://host:port")
        host = match["host"].strip("[]")
        port = int(match["port"])
        if port > 65535:
            raise ListenerConfigError(f"{setting}: port {port} out of range")
        out.append((match["name"].upper(), host, port))
    names = [name for name, _h, _p in out]
    if len(set(names)) != len(names):
        raise ListenerConfigError(f"{setting}: each listener name may appear once ({text!r})")
    return out


def parse_protocol_map(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in list_setting(text):
        name, sep, protocol = item.partition(":")
        protocol = protocol.strip().upper()
        if not sep or protocol not in PROTOCOLS:
            raise ListenerConfigError(f"listener.security.protocol.map: {item!r} is not NAME:PROTOCOL "
                                      f"with PROTOCOL one of {sorted(PROTOCOLS)}")
        out[name.strip().upper()] = protocol
    return out


def parse_listeners(config: BrokerConfig) -> list[Listener]:
    """The listeners ``config`` asks for, first one first (it is the one ``Broker.bootstrap`` names)."""
    text = str(config.get("listeners")).strip()
    if not text:
        return [Listener("PLAINTEXT", "PLAINTEXT", config.host, config.port, config.advertised_host,
                         config.advertised_port)]
    protocols = parse_protocol_map(str(config.get("listener.security.protocol.map")))
    listeners: list[Listener] = []
    for name, host, port in _parse_endpoints(text, "listeners"):
        protocol = protocols.get(name)
        if protocol is None:
            raise ListenerConfigError(f"listener {name} has no entry in listener.security.protocol.map")
        listeners.append(Listener(name, protocol, host, port))
    by_name = {listener.name: listener for listener in listeners}
    for name, host, port in _parse_endpoints(str(config.get("advertised.listeners")), "advertised.listeners"):
        if name not in by_name:
            raise ListenerConfigError(f"advertised.listeners names {name}, which is not in listeners")
        by_name[name].advertised_host = host or None
        by_name[name].advertised_port = port or None
    bound = [(listener.host, listener.port) for listener in listeners if listener.port]
    if len(set(bound)) != len(bound):
        raise ListenerConfigError(f"listeners: two listeners on one port ({text!r})")
    return listeners


def prepare(config: BrokerConfig, listener: Listener) -> Listener:
    """Check a listener's settings and build what it needs (TLS context, SASL mechanism list)."""
    if listener.uses_tls:
        listener.ssl_context = server_ssl_context(config, listener.name)
    if listener.uses_sasl:
        from minikafka.broker.sasl import SUPPORTED_MECHANISMS

        wanted = [m.upper() for m in list_setting(str(listener_setting(config, listener.name,
                                                                         "sasl.enabled.mechanisms")))]
        unknown = [m for m in wanted if m not in SUPPORTED_MECHANISMS]
        if unknown or not wanted:
            raise ListenerConfigError(f"listener {listener.name}: sasl.enabled.mechanisms {wanted} — minikafka "
                                      f"supports {list(SUPPORTED_MECHANISMS)}")
        listener.sasl_mechanisms = tuple(wanted)
    return listener


def server_ssl_context(config: BrokerConfig, listener_name: str) -> ssl.SSLContext:
    """A TLS server context from PEM settings (``ssl.keystore.type=PEM``, as Kafka's KIP-651).

    ``ssl.keystore.location`` names one PEM file holding the private key and the certificate
    chain; or ``ssl.keystore.key`` and ``ssl.keystore.certificate.chain`` hold the PEM text itself.
    ``ssl.key.password`` decrypts an encrypted key. ``ssl.client.auth=required|requested`` asks
    clients for a certificate signed by a CA in ``ssl.truststore.location`` (PEM).
    """

    def get(key: str) -> str:
        return str(listener_setting(config, listener_name, key) or "").strip()

    if get("ssl.keystore.type").upper() != "PEM":
        raise ListenerConfigError(f"listener {listener_name}: ssl.keystore.type {get('ssl.keystore.type')!r}: "
                                  "minikafka reads PEM key stores only")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    password = get("ssl.key.password") or None
    location = get("ssl.keystore.location")
    try:
        if location:
            context.load_cert_chain(location, password=password)
        elif get("ssl.keystore.certificate.chain") and get("ssl.keystore.key"):
            _load_inline_chain(context, get("ssl.keystore.certificate.chain"), get("ssl.keystore.key"), password)
        else:
            raise ListenerKeyMaterialError(f"listener {listener_name} uses TLS but neither ssl.keystore.location nor "
                                      "ssl.keystore.certificate.chain and ssl.keystore.key are set")
        client_auth = get("ssl.client.auth").lower() or "none"
        if client_auth not in ("none", "requested", "required"):
            raise ListenerConfigError(f"ssl.client.auth {client_auth!r}: expected none, requested or required")
        if client_auth != "none":
            truststore = get("ssl.truststore.location")
            if not truststore:
                raise ListenerConfigError(f"ssl.client.auth={client_auth} needs ssl.truststore.location")
            context.load_verify_locations(cafile=truststore)
            context.verify_mode = ssl.CERT_REQUIRED if client_auth == "required" else ssl.CERT_OPTIONAL
    except (OSError, ssl.SSLError) as exc:
        raise ListenerKeyMaterialError(f"listener {listener_name}: cannot load the TLS key store: {exc}") from exc
    return context


def _load_inline_chain(context: ssl.SSLContext, chain: str, key: str, password: str | None) -> None:
    # The ssl module loads key stores from files only: write them to a private temporary file.
    fd, path = tempfile.mkstemp(prefix="minikafka-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(key.strip() + "\n" + chain.strip() + "\n")
        context.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)


def remember_bound_ports(config: BrokerConfig, listeners: list[Listener]) -> None:
    """Write ports picked at start (0) back into ``listeners`` so a restart binds the same ones,
    as ``--port 0`` does for the default listener."""
    if not str(config.get("listeners")).strip():
        return
    parts = []
    for listener in listeners:
        host = f"[{listener.host}]" if ":" in listener.host else listener.host
        parts.append(f"{listener.name}://{host}:{listener.port}")
    config.settings["listeners"] = ",".join(parts)


#: Seconds a TLS client has to finish its handshake before the connection is dropped.
TLS_HANDSHAKE_TIMEOUT = 10.0


class ListenerSet:
    """The broker's listeners and their servers, opened and closed together."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.listeners = [prepare(config, listener) for listener in parse_listeners(config)]
        self.servers: list[Acceptor] = []

    @property
    def primary(self) -> Listener:
        return self.listeners[0]

    @property
    def needs_sasl(self) -> bool:
        return any(listener.uses_sasl for listener in self.listeners)

    def get(self, name: str) -> Listener:
        for listener in self.listeners:
            if listener.name == name.upper():
                return listener
        raise KeyError(f"no listener named {name}")

    async def open(self, on_connect: Callable[..., Coroutine[Any, Any, None]]) -> None:
        """Bind every listener (all or none: a busy port closes the ones already open). Connections
        wait in the listen backlog until :meth:`start_accepting`."""
        backlog = int(self.config.get("socket.listen.backlog.size"))
        max_bytes = int(self.config.get("socket.request.max.bytes"))
        try:
            for listener in self.listeners:
                host = listener.host or self.config.host
                try:
                    sockets = bind_sockets(host, listener.port, backlog)
                except OSError as exc:
                    setting = f"listener {listener.name}" if str(self.config.get("listeners")).strip() else "host/port"
                    raise BindError(setting, host, listener.port, bind_reason(exc)) from exc
                # the largest frame read before the connection says otherwise: before SASL
                # authentication, Kafka reads at most sasl.server.max.receive.size bytes
                limit = min(max_bytes, int(self.config.get("sasl.server.max.receive.size"))) \
                    if listener.uses_sasl else max_bytes
                server = Acceptor(sockets, functools.partial(on_connect, listener=listener),
                                  ssl_context=listener.ssl_context, ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT,
                                  limit=limit)
                self.servers.append(server)
                listener.port = sockets[0].getsockname()[1]
        except BaseException:
            self.close()
            raise
        remember_bound_ports(self.config, self.listeners)

    def start_accepting(self) -> None:
        for server in self.servers:
            server.start()

    def close(self) -> None:
        for server in self.servers:
            server.close()

    async def wait_closed(self) -> None:
        for server in self.servers:
            await server.wait_closed()

    def describe(self) -> str:
        return ", ".join(f"{listener.name}://{listener.host or self.config.host}:{listener.port} "
                         f"({listener.security_protocol}, advertised {listener.bootstrap})"
                         for listener in self.listeners)
