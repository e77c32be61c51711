"""The ``minikafka`` command: ``serve`` runs a broker in the foreground; ``ping`` checks one answers."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any, NoReturn

from minikafka import __version__, address_file
from minikafka.config import (
    BrokerConfig,
    parse_settings,
    setting_variable,
    settings_from_env,
    unknown_variables,
)
from minikafka.startup_errors import (
    EXIT_CODES,
    BindError,
    ConfigError,
    DataDirError,
    FaultFileError,
    StartupError,
)

if TYPE_CHECKING:
    import logging

    from minikafka.broker.server import Broker


def _env(variable: str, default: Any = None) -> Any:
    return os.environ.get(variable, default)


class _Parser(argparse.ArgumentParser):
    """A bad command line gets one line (argparse would print the usage first) and exit 2; it
    points at the help of the sub-command it was for (``see minikafka serve --help``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: sub-command name -> its parser (filled by build_parser)
        self.commands: dict[str, argparse.ArgumentParser] = {}

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number from 0 to 65535, got {text!r}")
    return port


def _node_id(text: str) -> int:
    try:
        node_id = int(text)
    except ValueError:
        node_id = -1
    if node_id < 0:
        raise argparse.ArgumentTypeError(f"expected a node id of 0 or more, got {text!r}")
    return node_id


_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _log_level(text: str) -> str:
    if text.upper() not in _LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(_LOG_LEVELS)}, got {text!r}")
    return text.upper()


def _flag(text: str) -> bool:
    if text.strip().lower() in ("true", "1", "yes"):
        return True
    if text.strip().lower() in ("false", "0", "no", ""):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _brokers(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of brokers from 1 to 16, got {text!r}") from None
    if not 1 <= value <= 16:
        raise argparse.ArgumentTypeError(f"expected a number of brokers from 1 to 16, got {text!r}")
    return value


#: ``serve`` options: flag, environment variable (listed in config.VARIABLES), default, type, help. A
#: flag left out falls back to its variable, then to the default (a variable set to "" counts as unset).
_SERVE_OPTIONS: list[tuple[str, str, Any, Callable[[str], Any], str]] = [
    ("--host", "MINIKAFKA_HOST", "127.0.0.1", str, "address to listen on; 0.0.0.0 listens on every interface"),
    ("--port", "MINIKAFKA_PORT", 9092, _port,
     "Kafka port; 0 picks a free port (the start-up line prints it); refused with --config listeners, "
     "which sets the ports"),
    ("--data-dir", "MINIKAFKA_DATA_DIR", "./minikafka-data", str, "directory of the logs; created if missing"),
    ("--node-id", "MINIKAFKA_NODE_ID", 1, _node_id, "node id (recorded in <data-dir>/meta.properties)"),
    ("--advertised-host", "MINIKAFKA_ADVERTISED_HOST", None, str,
     "host clients are told to connect to (unset: --host, or 127.0.0.1 for 0.0.0.0)"),
    ("--advertised-port", "MINIKAFKA_ADVERTISED_PORT", None, _port,
     "port clients are told (unset: the listening port)"),
    ("--log-level", "MINIKAFKA_LOG_LEVEL", "INFO", _log_level, f"one of {', '.join(_LOG_LEVELS)}"),
    ("--faults", "MINIKAFKA_FAULTS", None, str,
     "fault-rule file (JSON or YAML) installed before the first request; a bad rule stops the start (exit 6)"),
    ("--admin-port", "MINIKAFKA_ADMIN_PORT", None, _port,
     "serve the HTTP admin endpoint (faults, lifecycle, /metrics) on this port; 0 picks one (unset: no endpoint)"),
    ("--admin-host", "MINIKAFKA_ADMIN_HOST", None, str, "address of the admin endpoint (unset: --host)"),
    ("--brokers", "MINIKAFKA_BROKERS", 1, _brokers,
     "run a cluster of this many brokers in one process (node ids 1..N, ports --port, --port+1, ...; "
     "data in <data-dir>/node-<id>; docs/cluster.md)"),
    ("--address-file", "MINIKAFKA_ADDRESS_FILE", None, str,
     "once listening, write each listener's HOST:PORT (every broker's, with --brokers) to this file, "
     "which `minikafka ping` reads (a container's health check); removed on a clean stop"),
]

_SERVE_EPILOG = (
    "Every broker setting can also come from the environment: MINIKAFKA_ + its name in capitals with\n"
    "dots as underscores (MINIKAFKA_LOG_SEGMENT_BYTES=1048576); --config wins over the environment.\n"
    "A MINIKAFKA_ variable minikafka does not read stops the start (exit 2): it would be a misspelt one.\n"
    "With listeners set (--config or MINIKAFKA_LISTENERS) the ports are the listeners': --port is\n"
    "refused, and MINIKAFKA_PORT (which the Docker image sets) is not used to listen.\n\n"
    "exit codes:\n" + "\n".join(f"  {code}  {meaning}" for code, meaning in EXIT_CODES.items())
)


def _parse_kv(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            _fail(ConfigError.exit_code, f"--config {item!r}: expected KEY=VALUE, e.g. num.partitions=3")
        out[key.strip()] = value.strip()
    return out


def _fail(code: int, message: str) -> NoReturn:
    _write_line(sys.stderr, f"minikafka: {message}")
    raise SystemExit(code)


def build_parser() -> _Parser:
    parser = _Parser(prog="minikafka", description="A Kafka-compatible mini-broker.")
    parser.add_argument("--version", action="version", version=f"minikafka {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run a broker in the foreground", epilog=_SERVE_EPILOG,
                           formatter_class=argparse.RawDescriptionHelpFormatter,
                           description="Run a broker in the foreground; SIGINT or SIGTERM stops it cleanly.")
    for flag, env, default, kind, text in _SERVE_OPTIONS:
        shown = "unset" if default is None else default
        serve.add_argument(flag, type=kind, default=None, metavar=flag[2:].replace("-", "_").upper(),
                           help=f"{text} [default: {shown}; env {env}]")
    serve.add_argument("--fsync", action="store_true", default=None,
                       help="fsync appends before acknowledging them [default: off; env MINIKAFKA_FSYNC=true]")
    serve.add_argument("--kafka-version", default=None, metavar="X.Y",
                       help="answer as this Kafka release does: its API versions and the behaviours they "
                            "gate (3.9 or 4.0; setting minikafka.kafka.version) [default: every version "
                            "minikafka serves]")
    serve.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                       help="a broker setting with Kafka's name, e.g. num.partitions=3 (repeatable); "
                            "unknown names and out-of-range values are refused")
    ping = sub.add_parser("ping", help="check that a broker answers (an ApiVersions round trip); exit 0 if so")
    ping.add_argument("address", nargs="?", default=None, metavar="HOST:PORT",
                      help="the broker (same as --bootstrap)")
    ping.add_argument("--bootstrap", default=None,
                      help="host:port (default: $MINIKAFKA_HOST or 127.0.0.1, and $MINIKAFKA_PORT or 9092)")
    ping.add_argument("--host", default=None, help="the broker's host (default: $MINIKAFKA_HOST or 127.0.0.1)")
    ping.add_argument("--port", type=_port, default=None, help="the broker's port (default: $MINIKAFKA_PORT or 9092)")
    ping.add_argument("--address-file", default=None,
                      help="ask the broker that wrote this file (serve --address-file) where it listens "
                           "(default: $MINIKAFKA_ADDRESS_FILE; an address or --host/--port wins)")
    ping.add_argument("--timeout", type=float, default=2.0, help="seconds to wait for the answer")
    ping.add_argument("--quiet", "-q", action="store_true", help="print nothing on success")
    from minikafka.spark_export.export import add_parser as add_export_parser  # needs no PySpark

    add_export_parser(sub)
    from minikafka.spark_export.upload import add_parser as add_upload_parser  # needs no pyarrow

    add_upload_parser(sub)
    parser.commands = dict(sub.choices)
    return parser


def _refuse_unknown_variables() -> None:
    """A MINIKAFKA_ variable that nothing reads is a misspelt one: refuse it, as --config refuses
    an unknown setting, rather than start without it."""
    unknown = unknown_variables()
    if not unknown:
        return
    named = [f"{name}: unknown environment variable" + (f"; did you mean {' or '.join(close)}?" if close else "")
             for name, close in unknown.items()]
    _fail(ConfigError.exit_code, "; ".join(named) + " (a broker setting's is MINIKAFKA_ + its name in capitals, "
                                                    "dots as underscores; see minikafka serve --help)")


def _resolve_serve_options(args: argparse.Namespace) -> dict[str, str]:
    """Fill the flags left out from their MINIKAFKA_* variables, then from the defaults. Returns
    where each option given came from (``port`` -> ``--port`` or ``MINIKAFKA_PORT``)."""
    sources: dict[str, str] = {}
    for flag, env, default, kind, _text in _SERVE_OPTIONS:
        dest = flag[2:].replace("-", "_")
        if getattr(args, dest) is not None:
            sources[dest] = flag
            continue
        raw = _env(env, "")
        try:
            setattr(args, dest, kind(raw) if raw != "" else default)
        except argparse.ArgumentTypeError as exc:
            _fail(ConfigError.exit_code, f"{env}: {exc}")
        if raw != "":
            sources[dest] = env
    if args.fsync is None:
        try:
            args.fsync = _flag(_env("MINIKAFKA_FSYNC", ""))
        except argparse.ArgumentTypeError as exc:
            _fail(ConfigError.exit_code, f"MINIKAFKA_FSYNC: {exc}")
    return sources


def _settings(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, str]]:
    """Environment settings overridden by --config, each checked on its own so that the message
    names where a bad one came from; and where each came from (``--config NAME`` or its variable)."""
    from_env = settings_from_env()
    for name, value in from_env.items():
        try:
            parse_settings({name: value})
        except ConfigError as exc:
            _fail(exc.exit_code, f"{setting_variable(name)}: {exc}")
    from_cli = _parse_kv(args.config)
    try:
        parse_settings(from_cli)
    except ConfigError as exc:
        _fail(exc.exit_code, f"--config {exc}")
    sources = {**{name: setting_variable(name) for name in from_env}, **{name: f"--config {name}" for name in from_cli}}
    return {**from_env, **from_cli}, sources


def _check_port_and_listeners(config: BrokerConfig, port_source: str | None, listeners_source: str,
                              address_file_given: bool) -> None:
    """With ``listeners`` set, Kafka binds the listeners' ports and so does minikafka: a --port
    beside them would be ignored, so it is refused. MINIKAFKA_PORT is not refused (the Docker image
    sets it for every container); it is only warned about when no listener has its port and no
    address file tells ``minikafka ping`` where the broker is, because ping knocks on that port."""
    import logging

    from minikafka.broker.listeners import parse_listeners

    listeners = str(config.get("listeners")).strip()
    if port_source == "--port":
        _fail(ConfigError.exit_code, f"--port {config.port}: not used with {listeners_source}={listeners}, "
                                     "which sets the ports (as in Kafka): give one or the other")
    ports = sorted({listener.port for listener in parse_listeners(config)})
    if port_source is not None and config.port not in ports and not address_file_given:
        logging.getLogger(__name__).warning(
            "%s=%d is not used: %s sets the ports (%s); minikafka ping and the Docker image's health check "
            "use %s, so set it to the port of a PLAINTEXT listener", port_source, config.port, listeners_source,
            ", ".join(map(str, ports)), port_source)


def _surviving_log_handler() -> logging.Handler:
    """A stderr handler that drops the log lines nobody reads any more (the pipe's reader exited):
    a broker must not die, or stop uncleanly, because its output went away."""
    import logging

    class SurvivingStreamHandler(logging.StreamHandler):
        def handleError(self, record: logging.LogRecord) -> None:
            if isinstance(sys.exc_info()[1], OSError):
                _silence(self.stream)
                return
            super().handleError(record)

    handler = SurvivingStreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    return handler


def _silence(stream: Any) -> None:
    """Point the file descriptor under ``stream`` at /dev/null (its reader is gone)."""
    try:
        fd = stream.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _write_line(stream: Any, line: str) -> None:
    try:
        print(line, file=stream, flush=True)
    except OSError:
        _silence(stream)


def serve(args: argparse.Namespace) -> int:
    _refuse_unknown_variables()
    sources = _resolve_serve_options(args)
    settings, setting_sources = _settings(args)
    if args.kafka_version is not None:
        settings["minikafka.kafka.version"] = args.kafka_version
    if _env("MINIKAFKA_EAGER_IMPORTS", "").lower() not in ("1", "true"):  # the escape hatch, and a baseline for the bench
        from minikafka import _kafka_codec

        _kafka_codec.defer_codec_packages()  # start-up time: load only what the broker uses (see the module)

    import asyncio  # here, not at the top: `minikafka ping` (a health check) needs none of these
    import logging
    import signal

    from minikafka.broker.embedded import new_event_loop
    from minikafka.broker.server import Broker

    logging.basicConfig(level=args.log_level, handlers=[_surviving_log_handler()])
    try:
        config = BrokerConfig(
            host=args.host,
            port=args.port,
            data_dir=args.data_dir,
            node_id=args.node_id,
            advertised_host=args.advertised_host,
            advertised_port=args.advertised_port or None,
            fsync=args.fsync,
            settings=settings,
        )
        if str(config.get("listeners")).strip():
            _check_port_and_listeners(config, sources.get("port"), setting_sources["listeners"],
                                      bool(args.address_file))
    except ConfigError as exc:
        _fail(exc.exit_code, str(exc))

    node_ids = range(1, args.brokers + 1) if args.brokers > 1 else (config.node_id,)
    faults_name = _faults_name(sources.get("faults", "--faults"), args.faults) if args.faults else ""
    fault_specs = _load_faults(args.faults, faults_name, node_ids)
    wants_control = args.admin_port is not None or bool(fault_specs)

    if args.brokers > 1:
        if str(config.get("listeners")).strip():
            _fail(ConfigError.exit_code, f"--brokers {args.brokers}: not yet with listeners (docs/cluster.md)")
        admin_port = None if args.admin_port is None else int(args.admin_port)
        if admin_port and config.port and config.port <= admin_port < config.port + args.brokers:
            given = {dest: _as_given(sources, dest, getattr(args, dest)) for dest in ("admin_port", "port", "brokers")}
            _fail(ConfigError.exit_code, f"{given['admin_port']} is broker {admin_port - config.port + 1}'s port "
                                         f"({given['port']}, {given['brokers']}): choose one outside "
                                         f"{config.port}-{config.port + args.brokers - 1}")
        loop = new_event_loop()
        try:
            loop.run_until_complete(_serve_cluster(config, args.brokers, args.admin_host or args.host, admin_port,
                                                   args.address_file, fault_specs, faults_name))
        except StartupError as exc:
            _fail(exc.exit_code, _for_the_command_line(exc, args))
        finally:
            loop.close()
        return 0

    async def main() -> None:
        broker = Broker(config)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        control = admin = None
        if wants_control:
            from minikafka.testkit.control import BrokerControl
            from minikafka.testkit.faults import FaultRuleError

            control = BrokerControl(broker)  # installs the fault interceptor before the first request
            try:
                control.faults.add_all(fault_specs)  # _load_faults checked them; this is what only a broker can
            except FaultRuleError as exc:
                raise FaultFileError(f"{faults_name}: {exc}") from None
        if control is not None and args.admin_port is not None:
            from minikafka.testkit.admin_http import AdminServer

            # bound before the broker starts: a busy admin port must not leave a half-started broker
            admin = await AdminServer(control, args.admin_host or args.host, int(args.admin_port)).start()
        try:
            await broker.start()
        except BaseException:
            if admin is not None:
                await admin.stop()
            raise
        if args.address_file:  # before the line: whoever waits for the line finds the file too
            _write_address_file(args.address_file, broker)
        _write_line(sys.stdout, f"minikafka listening on {broker.host}:{broker.port}")
        if admin is not None:
            _write_line(sys.stdout, f"minikafka admin endpoint on {admin.host}:{admin.port}")
        await stop.wait()
        if admin is not None:
            await admin.stop()
        await broker.stop()
        if args.address_file:
            address_file.remove(args.address_file)

    loop = new_event_loop()
    try:
        loop.run_until_complete(main())
    except StartupError as exc:
        _fail(exc.exit_code, _for_the_command_line(exc, args))
    finally:
        loop.close()
    return 0


async def _serve_cluster(config: BrokerConfig, brokers: int, admin_host: str, admin_port: int | None,
                         address_path: str | None, fault_specs: list[dict[str, Any]], faults_name: str) -> None:
    """``serve --brokers N``: the cluster (with the rules of ``--faults``, and its admin endpoint
    with ``--admin-port``) until SIGINT or SIGTERM, then every broker stops cleanly. The address
    file names every broker (their ports stay theirs through restarts), so a health check asks
    them all."""
    import asyncio
    import signal

    from minikafka.broker.cluster.cluster import Cluster

    cluster = Cluster(config, brokers)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    admin = control = None
    if admin_port is not None or fault_specs:
        from minikafka.testkit.cluster_control import ClusterControl
        from minikafka.testkit.faults import FaultRuleError

        control = ClusterControl(cluster)  # every broker's interceptor, before the first request
        try:
            control.faults.add_all(fault_specs)  # _load_faults checked them against these brokers
        except FaultRuleError as exc:
            raise FaultFileError(f"{faults_name}: {exc}") from None
    if control is not None and admin_port is not None:
        from minikafka.testkit.cluster_admin_http import ClusterAdminServer

        # bound before the brokers start: a busy admin port must not leave a half-started cluster
        admin = await ClusterAdminServer(control, admin_host, admin_port).start()
    try:
        await cluster.start()
    except BaseException:
        if admin is not None:
            await admin.stop()
        raise
    if address_path:
        _write_address_file(address_path, *cluster.brokers.values())
    _write_line(sys.stdout, f"minikafka listening on {cluster.bootstrap}")
    if admin is not None:
        _write_line(sys.stdout, f"minikafka admin endpoint on {admin.host}:{admin.port}")
    await stop.wait()
    if admin is not None:
        await admin.stop()
    await cluster.stop()
    if address_path:
        address_file.remove(address_path)


def _write_address_file(path: str, *brokers: Broker) -> None:
    """Where each listener (of each broker of a cluster) is bound, for `minikafka ping`; a file that
    cannot be written is logged, not fatal: the broker serves, only the health check that reads
    the file fails."""
    import logging

    bound = {}
    for broker in brokers:
        assert broker.listeners is not None  # started
        bound[broker.node_id] = [(listener.security_protocol, listener.host or broker.host, listener.port)
                                 for listener in broker.listeners.listeners]
    try:
        if len(brokers) == 1:
            address_file.write(path, bound[brokers[0].node_id])
        else:
            address_file.write_cluster(path, bound)
    except OSError as exc:
        logging.getLogger("minikafka").warning("--address-file %s: cannot write it (%s): `minikafka ping` "
                                               "reading it will fail", path, exc.strerror or exc)


def _for_the_command_line(exc: StartupError, args: argparse.Namespace) -> str:
    """The error in the words of the command line: the flags that set what failed."""
    if isinstance(exc, BindError):
        if exc.setting == "admin endpoint":
            return f"--admin-host {exc.host} / --admin-port {args.admin_port}: cannot listen on " \
                   f"{exc.host}:{exc.port}: {exc.reason}"
        if exc.setting == "host/port":
            return f"--host {exc.host} / --port {exc.port}: cannot listen on {exc.host}:{exc.port}: {exc.reason}"
        return f"--config listeners ({exc.setting}): cannot listen on {exc.host}:{exc.port}: {exc.reason}"
    if isinstance(exc, DataDirError):
        return f"--data-dir {str(exc).removeprefix('data dir ')}"
    return str(exc)


def _as_given(sources: dict[str, str], dest: str, value: Any) -> str:
    """An option as the user gave it: ``--port 9092`` or ``MINIKAFKA_PORT=9092`` (or its default)."""
    source = sources.get(dest, "--" + dest.replace("_", "-"))
    return f"{source}={value}" if source.startswith("MINIKAFKA_") else f"{source} {value}"


def _faults_name(source: str, path: str) -> str:
    """``--faults rules.yaml`` or ``MINIKAFKA_FAULTS=rules.yaml``: the file as the user named it."""
    return f"{source}={path}" if source.startswith("MINIKAFKA_") else f"{source} {path}"


def _load_faults(path: str | None, name: str, node_ids: Collection[int]) -> list[dict[str, Any]]:
    """The rules of the fault file (``name``: as the user gave it), every one checked (fields, API
    names and keys, the brokers it names among ``node_ids``, ids) before a broker starts: a bad rule
    is one line naming the file and the rule, and exit 6."""
    if not path:
        return []
    from minikafka.testkit.fault_files import FaultFileRuleError, load_rules

    try:
        return load_rules(path, node_ids=node_ids)
    except FaultFileRuleError as exc:
        _fail(FaultFileError.exit_code, f"{name}: {exc.detail}")
    except OSError as exc:
        _fail(FaultFileError.exit_code, f"{name}: cannot read it: {exc.strerror or exc}")


def ping(args: argparse.Namespace) -> int:
    """An ApiVersions round trip (:mod:`minikafka.health`) to the broker, or to every broker of a
    cluster whose address file names several: healthy only when each one answers."""
    from minikafka import health

    failed = 0
    for host, port, tls in _ping_addresses(args):
        bootstrap = f"{host}:{port}"
        try:
            count = health.ask(host, port, tls, args.timeout)
        except (OSError, ValueError) as exc:
            print(f"minikafka ping {bootstrap}: {exc}", file=sys.stderr)
            failed += 1
            continue
        if not args.quiet:
            print(f"minikafka at {bootstrap} answers: {count} APIs")
    return 1 if failed else 0


def _ping_addresses(args: argparse.Namespace) -> list[tuple[str, int, bool]]:
    """HOST:PORT (positional or --bootstrap), or --host / --port, or the address file a broker (or
    a cluster: one address per broker) wrote (--address-file, MINIKAFKA_ADDRESS_FILE), or
    MINIKAFKA_HOST / MINIKAFKA_PORT; each with whether to speak TLS (only a file says so)."""
    address = args.address or args.bootstrap
    if address is not None:
        if args.host is not None or args.port is not None:
            _fail(ConfigError.exit_code, f"ping {address}: give HOST:PORT or --host/--port, not both")
        host, sep, port_text = address.rpartition(":")
        try:
            return [(host or "127.0.0.1", _port(port_text) if sep else _port(""), False)]
        except argparse.ArgumentTypeError:
            _fail(ConfigError.exit_code, f"ping {address!r}: expected HOST:PORT with a port from 0 to 65535, "
                                         "e.g. 127.0.0.1:9092")
    path = args.address_file or _env("MINIKAFKA_ADDRESS_FILE", "")
    if path and args.host is None and args.port is None:
        try:
            return address_file.read_brokers(path)
        except (OSError, ValueError) as exc:
            _write_line(sys.stderr, f"minikafka ping: --address-file {path}: no broker address in it yet "
                                    f"({getattr(exc, 'strerror', None) or exc})")
            raise SystemExit(1) from None
    # a broker listening everywhere: loopback reaches it
    host = address_file.local_host(args.host or _env("MINIKAFKA_HOST", "") or "127.0.0.1")
    if args.port is not None:
        return [(host, args.port, False)]
    try:
        return [(host, _port(_env("MINIKAFKA_PORT", "") or "9092"), False)]
    except argparse.ArgumentTypeError as exc:
        _fail(ConfigError.exit_code, f"MINIKAFKA_PORT: {exc}")  # the message quotes the value


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, unrecognized = parser.parse_known_args(argv)
    if unrecognized:  # argparse would blame the top-level parser: point at the sub-command's help
        parser.commands.get(args.command, parser).error(f"unrecognized arguments: {' '.join(unrecognized)}")
    if args.command == "serve":
        return serve(args)
    if args.command == "ping":
        return ping(args)
    if args.command in ("export", "upload"):
        return int(args.func(args) or 0)
    return 2


if __name__ == "__main__":
    sys.exit(main())
