"""Load kafka-python's protocol classes without running ``kafka/__init__.py`` first.

minikafka uses kafka-python only as a codec: the message classes under ``kafka.protocol`` and
the record helpers under ``kafka.record``. But importing any ``kafka.*`` module first runs the
package's ``__init__``, which loads kafka-python's whole client (producer, consumer, admin
client, network stack) — about half of ``minikafka serve``'s start-up time.

:func:`defer_package_init` puts a stand-in for the package in ``sys.modules`` that has the real
package's ``__path__`` and spec, so ``import kafka.protocol.metadata`` loads just that module.
The package's ``__init__`` runs, in the same module object, the first time something asks the
package itself for a name that is not a submodule — ``from kafka import KafkaProducer`` keeps
working in the same process, it only pays the import cost at that moment.

The same helps with ``crc32c``, whose ``__init__`` looks up its own version in the installed
package metadata (``importlib.metadata``, about 20 ms) before re-exporting one C function.

:func:`quiet_kafka_imports` is the one scope in which minikafka loads kafka-python's modules: it
hides the deprecation warnings kafka-python itself emits while it loads, which a user could not act on.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.machinery import ModuleSpec
from typing import Any

_lock = threading.RLock()
_MISSING = object()
#: package name -> spec whose ``__init__`` has not run yet
_pending: dict[str, ModuleSpec] = {}
#: package name -> submodules where names asked of the package are looked for first
_search: dict[str, tuple[str, ...]] = {}


class _DeferredPackage(types.ModuleType):
    """A package whose ``__init__`` runs on the first lookup of a name it does not have yet."""

    def __getattr__(self, name: str) -> object:
        package = self.__name__
        if package in _pending and not name.startswith("__"):
            for submodule in _search.get(package, ()):
                value = getattr(importlib.import_module(f"{package}.{submodule}"), name, _MISSING)
                if value is not _MISSING:
                    setattr(self, name, value)
                    return value
        if not (name.startswith("__") and name.endswith("__")):
            # ``from kafka import codec``: a submodule needs no ``__init__``.
            try:
                return importlib.import_module(f"{package}.{name}")
            except ModuleNotFoundError as exc:
                if exc.name != f"{package}.{name}":
                    raise
        _run_init(self)
        try:
            return self.__dict__[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None

    def __dir__(self) -> list[str]:
        _run_init(self)
        return list(self.__dict__)


def _run_init(module: types.ModuleType) -> None:
    with _lock:
        spec = _pending.pop(module.__name__, None)
        if spec is None:  # done already, or running in this thread (a partly initialised package)
            return
        assert spec.loader is not None
        try:
            spec.loader.exec_module(module)
        except BaseException:
            _pending[module.__name__] = spec
            raise
        module.__class__ = types.ModuleType


def defer_package_init(name: str = "kafka", search: tuple[str, ...] = ()) -> bool:
    """Install the stand-in for package ``name``; False if it is imported already or absent.

    ``search`` names submodules where a name asked of the package is looked for first, for a
    package whose ``__init__`` only re-exports them: with ``("_crc32c",)``, ``from crc32c
    import crc32c`` skips an ``__init__`` that reads package metadata. A name found in none of
    them runs the real ``__init__`` as usual, so a moved name costs time, never correctness.
    """
    with _lock:
        if name in sys.modules:
            return False
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or spec.submodule_search_locations is None:
            return False
        module = importlib.util.module_from_spec(spec)
        module.__class__ = _DeferredPackage
        _pending[name] = spec
        _search[name] = tuple(search)
        sys.modules[name] = module
        return True


#: the ``kafka.protocol.admin`` modules that hold the messages minikafka serves (the package's
#: ``__init__`` also loads ACL, client-quota and SCRAM-user messages: about 10 ms)
_ADMIN_MODULES = ("topics", "cluster", "configs", "groups", "transactions")


def defer_codec_packages() -> None:
    """What ``minikafka serve`` defers: kafka-python's client and the admin messages it does
    not serve, and crc32c's metadata lookup."""
    defer_package_init("kafka")
    defer_package_init("kafka.protocol.admin", _ADMIN_MODULES)
    defer_package_init("crc32c", ("_crc32c",))


def init_deferred() -> None:
    """Run every deferred ``__init__`` now (for code that inspects the packages wholesale)."""
    for name in list(_pending):
        module = sys.modules.get(name)
        if module is not None:
            _run_init(module)


#: what kafka-python 3.x emits while it loads: each message class reads its JSON schema with
#: ``importlib.resources.read_text``, deprecated since Python 3.11 (``open_text`` is its inner call).
#: kafka-python 3.0.12 (the newest release) still does; the filters match only these messages.
KAFKA_PYTHON_IMPORT_WARNINGS = (r"read_text is deprecated", r"open_text is deprecated")
_quiet_lock = threading.RLock()


@contextmanager
def quiet_kafka_imports() -> Iterator[None]:
    """Load kafka-python modules inside this scope, so that minikafka's own imports emit no warning.

    Under ``python -W error`` or pytest's ``filterwarnings = error`` those warnings would be
    errors in the user's process, raised by minikafka importing its codec. Only these
    warnings are hidden, and only here: a user's own ``from kafka import ...`` still warns
    (docs/integration-testing.md has the filter lines for that). ``catch_warnings`` swaps the
    process's filters for the import's few milliseconds; the pytest fixtures therefore load
    everything once on the test's thread (not on the broker's, in the middle of a test).
    """
    with _quiet_lock, warnings.catch_warnings():
        for message in KAFKA_PYTHON_IMPORT_WARNINGS:
            warnings.filterwarnings("ignore", message=message, category=DeprecationWarning)
        yield


def load_quietly(module: str, name: str) -> Any:
    """``module.name``, the module imported (and the name looked up: a deferred package loads
    it then) inside :func:`quiet_kafka_imports`."""
    with quiet_kafka_imports():
        return getattr(importlib.import_module(module), name)
