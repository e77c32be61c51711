"""The ``minikafka`` command: ``serve`` runs a broker in the foreground; ``ping`` checks one answers."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from minikafka.config import BrokerConfig, settings_from_env


def _env(name: str, default: Any = None) -> Any:
    return os.environ.get(f"MINIKAFKA_{name}", default)


def _parse_kv(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--config expects key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="minikafka", description="A Kafka-compatible mini-broker.")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run a broker in the foreground")
    serve.add_argument("--host", default=_env("HOST", "127.0.0.1"))
    serve.add_argument("--port", type=int, default=int(_env("PORT", 9092)), help="0 picks a free port")
    serve.add_argument("--data-dir", default=_env("DATA_DIR", "./minikafka-data"))
    serve.add_argument("--node-id", type=int, default=int(_env("NODE_ID", 1)))
    serve.add_argument("--advertised-host", default=_env("ADVERTISED_HOST"))
    serve.add_argument("--advertised-port", type=int, default=_env("ADVERTISED_PORT"))
    serve.add_argument("--fsync", action="store_true", default=_env("FSYNC", "false").lower() == "true",
                       help="fsync appends before acknowledging them")
    serve.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                       help="a broker setting with Kafka's name, e.g. num.partitions=3 (repeatable)")
    serve.add_argument("--log-level", default=_env("LOG_LEVEL", "INFO"))
    serve.add_argument("--faults", default=_env("FAULTS"), metavar="FILE",
                       help="fault rules to install at start (JSON, or YAML with PyYAML installed)")
    serve.add_argument("--admin-port", type=int, default=_env("ADMIN_PORT"),
                       help="serve the HTTP admin endpoint (faults, lifecycle, /metrics) on this port; 0 picks one")
    serve.add_argument("--admin-host", default=_env("ADMIN_HOST"),
                       help="address of the admin endpoint (default: --host)")
    ping = sub.add_parser("ping", help="check that a broker answers (an ApiVersions round trip); exit 0 if so")
    ping.add_argument("--bootstrap", default=None,
                      help="host:port (default: $MINIKAFKA_HOST or 127.0.0.1, and $MINIKAFKA_PORT or 9092)")
    ping.add_argument("--timeout", type=float, default=2.0, help="seconds to wait for the answer")
    ping.add_argument("--quiet", "-q", action="store_true", help="print nothing on success")
    from minikafka.spark_export.export import add_parser as add_export_parser  # needs no PySpark

    add_export_parser(sub)
    return parser


def serve(args: argparse.Namespace) -> int:
    if _env("EAGER_IMPORTS", "").lower() not in ("1", "true"):  # the escape hatch, and a baseline for the bench
        from minikafka import _kafka_codec

        _kafka_codec.defer_codec_packages()  # start-up time: load only what the broker uses (see the module)

    import asyncio  # here, not at the top: `minikafka ping` (a health check) needs none of these
    import logging
    import signal

    from minikafka.broker.embedded import new_event_loop
    from minikafka.broker.server import Broker

    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings: dict[str, Any] = settings_from_env()
    settings.update(_parse_kv(args.config))
    config = BrokerConfig(
        host=args.host,
        port=args.port,
        data_dir=args.data_dir,
        node_id=args.node_id,
        advertised_host=args.advertised_host,
        advertised_port=int(args.advertised_port) if args.advertised_port else None,
        fsync=args.fsync,
        settings=settings,
    )

    fault_specs = _load_faults(args.faults)
    wants_control = args.admin_port is not None or bool(fault_specs)

    async def main() -> None:
        broker = Broker(config)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        control = admin = None
        if wants_control:
            from minikafka.broker.control import BrokerControl

            control = BrokerControl(broker)  # installs the fault interceptor before the first request
            control.faults.add_all(fault_specs)
        await broker.start()
        print(f"minikafka listening on {broker.host}:{broker.port}", flush=True)
        if control is not None and args.admin_port is not None:
            from minikafka.broker.admin_http import AdminServer

            admin = await AdminServer(control, args.admin_host or args.host, int(args.admin_port)).start()
            print(f"minikafka admin endpoint on {admin.host}:{admin.port}", flush=True)
        await stop.wait()
        if admin is not None:
            await admin.stop()
        await broker.stop()

    loop = new_event_loop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    return 0


def _load_faults(path: str | None) -> list[dict[str, Any]]:
    if not path:
        return []
    from minikafka.broker.faults import FaultRule, FaultRuleError, load_rules

    try:
        specs = load_rules(path)
        for spec in specs:
            FaultRule.from_dict(spec)  # fail before the broker starts, not at the first request
    except (OSError, FaultRuleError) as exc:
        raise SystemExit(f"minikafka: --faults {path}: {exc}") from None
    return specs


def ping(args: argparse.Namespace) -> int:
    """ApiVersions v0 by hand: no asyncio, no kafka-python, so a health check costs ~20 ms."""
    import socket
    import struct

    host = _env("HOST", "127.0.0.1")
    if host in ("0.0.0.0", "::", ""):  # listening everywhere: loopback reaches it
        host = "127.0.0.1"
    bootstrap = args.bootstrap or f"{host}:{_env('PORT', 9092)}"
    host, _, port = bootstrap.rpartition(":")
    correlation_id = 0x6D6B  # "mk"
    client_id = b"minikafka-ping"
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=args.timeout) as sock:
            sock.settimeout(args.timeout)
            sock.sendall(struct.pack(">i", len(body)) + body)
            data = b""
            while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
                chunk = sock.recv(65536)
                if not chunk:
                    raise ConnectionError("the broker closed the connection")
                data += chunk
    except (OSError, ValueError) as exc:
        print(f"minikafka ping {bootstrap}: {exc}", file=sys.stderr)
        return 1
    if len(data) < 14:
        print(f"minikafka ping {bootstrap}: answer too short to be ApiVersions", file=sys.stderr)
        return 1
    got_id, error_code, count = struct.unpack_from(">ihi", data, 4)
    if got_id != correlation_id or error_code != 0 or count <= 0:
        print(f"minikafka ping {bootstrap}: bad ApiVersions answer (correlation {got_id}, error {error_code}, "
              f"{count} APIs)", file=sys.stderr)
        return 1
    if not args.quiet:
        print(f"minikafka at {bootstrap} answers: {count} APIs")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        return serve(args)
    if args.command == "ping":
        return ping(args)
    if args.command == "export":
        return int(args.func(args) or 0)
    return 2


if __name__ == "__main__":
    sys.exit(main())
