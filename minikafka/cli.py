"""The ``minikafka`` command: ``serve`` runs a broker in the foreground."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
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
    return parser


def serve(args: argparse.Namespace) -> int:
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

    async def main() -> None:
        broker = Broker(config)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await broker.start()
        print(f"minikafka listening on {broker.host}:{broker.port}", flush=True)
        await stop.wait()
        await broker.stop()

    loop = new_event_loop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        return serve(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
