"""Why a broker could not start, as one line for its user and an exit code for each kind of mistake.

``minikafka serve`` prints ``str(error)`` and exits with ``error.exit_code``; the Python API raises
the same exceptions. Each class also derives from the built-in exception code has always caught
for it (a bad value is a ``ValueError``, a port that cannot be bound an ``OSError``).
"""

from __future__ import annotations

#: Exit codes of ``minikafka serve`` (listed in ``minikafka serve --help``).
EXIT_CODES: dict[int, str] = {
    1: "an unexpected error (a bug: the traceback says where)",
    2: "a bad command line, environment variable or broker setting (name, value or range)",
    3: "an address that cannot be listened on (in use, not an address of this machine, unknown host)",
    4: "a data directory that cannot be used (a file, not writable, another node's, in use by another broker)",
    5: "TLS key material or SASL users that cannot be loaded",
    6: "a fault-rule file that cannot be read or has an invalid rule",
}


class StartupError(Exception):
    """The broker refuses to start; the message names the setting, its value and what is expected."""

    exit_code = 1


class ConfigError(StartupError, ValueError):
    """A setting with an unknown name or a value of the wrong type or range."""

    exit_code = 2


class BindError(StartupError, OSError):
    """A listener (the broker's or the admin endpoint's) whose address cannot be bound."""

    exit_code = 3

    def __init__(self, setting: str, host: str, port: int, reason: str) -> None:
        super().__init__(f"{setting}: cannot listen on {host}:{port}: {reason}")
        self.setting, self.host, self.port, self.reason = setting, host, port, reason


class DataDirError(StartupError, RuntimeError):
    """A data directory the broker cannot use: found before anything is written to it."""

    exit_code = 4


class KeyMaterialError(StartupError, ValueError):
    """A TLS key store, trust store or SASL user list that is missing or cannot be read."""

    exit_code = 5


class FaultFileError(StartupError, ValueError):
    """A ``--faults`` file that cannot be read or holds an invalid rule."""

    exit_code = 6


def bind_reason(exc: OSError) -> str:
    """What a failed bind means, in the words a user needs."""
    import errno
    import socket

    if isinstance(exc, socket.gaierror):
        return f"unknown host ({exc.strerror or exc})"
    if exc.errno == errno.EADDRINUSE:
        return "the address is already in use (another broker or program listens there)"
    if exc.errno == errno.EADDRNOTAVAIL:
        return "not an address of this machine (use 127.0.0.1, 0.0.0.0 or one of its interfaces)"
    if exc.errno == errno.EACCES:
        return "permission denied (ports below 1024 need privileges)"
    return exc.strerror or str(exc)
