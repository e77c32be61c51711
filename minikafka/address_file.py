"""Where a running broker listens, in a small file that a health check reads.

A container's health check is a process of its own: it cannot see the flags, environment variables
or ``listeners`` setting that chose the broker's port, and ``--port 0`` chooses it only at start.
So ``minikafka serve --address-file PATH`` writes one line per listener once they are bound
(``PLAINTEXT 127.0.0.1:9092``), and ``minikafka ping`` reads the file instead of guessing. The file
is replaced atomically (a reader never sees half of it) and removed when the broker stops cleanly.
A cluster (``--brokers N``) writes every broker's listeners, each line tagged with its node id
(``PLAINTEXT 127.0.0.1:9093 broker=2``), and its health check asks every broker.
"""

from __future__ import annotations

import os
from pathlib import Path

#: security protocols whose connections start with TLS
TLS_PROTOCOLS = ("SSL", "SASL_SSL")


def local_host(host: str) -> str:
    """The address a process on this machine connects to for a listener bound to ``host``."""
    return "127.0.0.1" if host in ("0.0.0.0", "", "::") else host


def write(path: str | os.PathLike[str], listeners: list[tuple[str, str, int]]) -> None:
    """Record ``(security protocol, bound host, port)`` of each listener, first listener first."""
    _replace(path, "".join(f"{protocol} {local_host(host)}:{port}\n" for protocol, host, port in listeners))


def write_cluster(path: str | os.PathLike[str], brokers: dict[int, list[tuple[str, str, int]]]) -> None:
    """Record each broker's listeners as :func:`write` does, every line tagged with its node id."""
    _replace(path, "".join(f"{protocol} {local_host(host)}:{port} broker={node_id}\n"
                           for node_id, listeners in sorted(brokers.items()) for protocol, host, port in listeners))


def _replace(path: str | os.PathLike[str], text: str) -> None:
    target = Path(path)
    temporary = target.with_name(f".{target.name}.{os.getpid()}")
    temporary.write_text(text)
    os.replace(temporary, target)


def remove(path: str | os.PathLike[str]) -> None:
    Path(path).unlink(missing_ok=True)


def read(path: str | os.PathLike[str]) -> tuple[str, int, bool]:
    """Host, port and whether it speaks TLS, of the listener a health check should ask (of the
    first broker, for a cluster's file): see :func:`read_brokers`."""
    return read_brokers(path)[0]


def read_brokers(path: str | os.PathLike[str]) -> list[tuple[str, int, bool]]:
    """For each broker the file names (one, or a cluster's in node id order): host, port and
    whether it speaks TLS of the listener a health check should ask, the first one without TLS
    (ApiVersions is answered before SASL authentication), else the first one. Raises OSError when
    the file cannot be read (no broker has started yet) and ValueError when it holds no listener."""
    brokers: dict[str, list[tuple[str, int, bool]]] = {}
    for line in Path(path).read_text().splitlines():
        fields = line.split()
        if len(fields) < 2:
            continue
        protocol, address, tag = fields[0], fields[1], fields[2] if len(fields) > 2 else ""
        host, sep, port = address.rpartition(":")
        if sep and port.isdigit():
            node = tag.removeprefix("broker=")
            brokers.setdefault(node, []).append((host, int(port), protocol.upper() in TLS_PROTOCOLS))
    if not brokers:
        raise ValueError(f"{path} names no listener")
    return [next((entry for entry in entries if not entry[2]), entries[0]) for entries in brokers.values()]
