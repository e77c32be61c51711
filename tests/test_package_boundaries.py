"""The layers of the package, and which of minikafka's modules each may import.

Like Kafka's ``checkstyle/import-control-*.xml``: one table says, for each layer, what its modules
may import besides the layer itself; anything else fails here. The walk reads the import
statements of the source (every one: top level, inside functions, under ``TYPE_CHECKING``).
docs/architecture.md#layers describes the layers.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parent.parent / "minikafka"

#: modules every layer may build on: no minikafka imports of their own beyond each other
FOUNDATION = ("minikafka._kafka_codec", "minikafka.clock", "minikafka.config", "minikafka.errors",
              "minikafka.startup_errors")

#: layer (a module or a package) -> what its modules may import, besides the layer itself and the
#: package ``minikafka`` (its ``__init__`` holds only the version). A module's layer is the
#: longest entry that names it or a package above it.
LAYERS: dict[str, tuple[str, ...]] = {
    "minikafka": (),
    "minikafka._kafka_codec": (),  # loads kafka-python's codec modules, quietly and without its client
    "minikafka.clock": (),
    "minikafka.errors": (),
    "minikafka.startup_errors": (),
    "minikafka.config": ("minikafka.startup_errors",),
    # the wire format: frames, headers, API keys, codecs; knows nothing of what answers requests
    "minikafka.protocol": ("minikafka._kafka_codec",),
    # partition logs on disk; knows nothing of the wire or of who calls it
    "minikafka.storage": FOUNDATION,
    # reads segment files on Spark's executors, without the broker: the on-disk format only
    "minikafka.spark_export": ("minikafka.storage.batch", "minikafka.storage.control",
                               "minikafka.storage.disk_format"),
    "minikafka.broker": ("minikafka.protocol", "minikafka.storage", *FOUNDATION),
    # the test kit drives a broker from outside, through its public lifecycle and interceptor
    "minikafka.testkit": ("minikafka.broker", "minikafka.protocol", "minikafka.storage", *FOUNDATION),
    # where `serve --address-file` says the listeners are bound, for `ping` and the image's health check
    "minikafka.address_file": (),
    # `ping`'s ApiVersions round trip, for the image's health check: the standard library only
    "minikafka.health": (),
    # the entry points wire everything together
    "minikafka.cli": ("minikafka.broker", "minikafka.spark_export", "minikafka.testkit", "minikafka.address_file",
                      "minikafka.health", *FOUNDATION),
    "minikafka.__main__": ("minikafka.cli",),
    "minikafka.pytest_plugin": ("minikafka.testkit",),  # the pytest11 entry point's name
    "minikafka.testing": (),
}

#: (importer, imported) -> why this import crosses the layers on purpose
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("minikafka.testing", "minikafka.testkit.in_process"):
        "the old import path of MiniKafka, kept so that users' `from minikafka.testing import ...` works",
}


def module_name(path: Path, root: Path = PACKAGE_ROOT) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def module_path(name: str, root: Path = PACKAGE_ROOT) -> Path | None:
    base = root.parent.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def imported_modules(path: Path, root: Path = PACKAGE_ROOT) -> set[str]:
    """The absolute names of the minikafka modules ``path`` imports (``from x import y``: x.y if
    that is a module, else x)."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                found.add(submodule if module_path(submodule, root) is not None else target)
    return {m for m in found if m == "minikafka" or m.startswith("minikafka.")}


def import_graph(root: Path = PACKAGE_ROOT) -> dict[str, set[str]]:
    """Every module of the package under ``root`` -> the package's modules it imports directly."""
    return {module_name(p, root): imported_modules(p, root) for p in sorted(root.rglob("*.py"))}


def reachable_from(start: list[Path]) -> dict[str, str]:
    """Every minikafka module reachable from ``start``: module -> the module that first imported it."""
    seen: dict[str, str] = {module_name(p): "" for p in start}
    todo = list(seen)
    while todo:
        current = todo.pop()
        path = module_path(current)
        if path is None:
            continue
        for imported in sorted(imported_modules(path)):
            # importing a.b.c runs a/__init__ and a/b/__init__ as well
            parts = imported.split(".")
            for i in range(1, len(parts) + 1):
                name = ".".join(parts[:i])
                if name not in seen:
                    seen[name] = current
                    todo.append(name)
    return seen


def within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def layer_of(module: str, layers: dict[str, tuple[str, ...]] = LAYERS) -> str | None:
    """The longest layer naming ``module`` or a package above it; the package ``minikafka`` is a
    layer of its own module only, so that a new top-level module has to be placed in the table."""
    named = [layer for layer in layers if within(module, layer) and (layer != "minikafka" or module == layer)]
    return max(named, key=len, default=None)


def violations(graph: dict[str, set[str]], layers: dict[str, tuple[str, ...]] = LAYERS,
               exceptions: dict[tuple[str, str], str] = EXCEPTIONS) -> list[str]:
    """One line per import the table does not allow, and per module the table does not place."""
    found: list[str] = []
    for module, imports in sorted(graph.items()):
        layer = layer_of(module, layers)
        if layer is None:
            found.append(f"{module} is in no layer")
            continue
        allowed = layers[layer] if layer == "minikafka" else (layer, *layers[layer])
        for imported in sorted(imports):
            if imported == "minikafka" or (module, imported) in exceptions:
                continue
            if not any(within(imported, a) for a in allowed):
                found.append(f"{module} ({layer}) imports {imported}")
    return found


def test_the_walk_sees_imports_of_every_kind() -> None:
    """The walk itself: it finds the test kit from the CLI, which wires the kit in from outside."""
    reached = reachable_from([PACKAGE_ROOT / "cli.py"])
    assert "minikafka.testkit.control" in reached
    assert "minikafka.broker.server" in reached


def test_the_broker_imports_nothing_from_the_test_kit() -> None:
    broker_modules = sorted((PACKAGE_ROOT / "broker").rglob("*.py"))
    assert len(broker_modules) > 20
    reached = reachable_from(broker_modules)
    leaks = {name: via for name, via in reached.items() if name.startswith("minikafka.testkit")}
    assert leaks == {}, f"broker modules reach the test kit (module: imported by): {leaks}"


def test_every_import_keeps_to_the_layers() -> None:
    graph = import_graph()
    assert len(graph) > 100 and "minikafka.protocol.apis" in graph and "minikafka.broker.server" in graph
    assert violations(graph) == []


def test_every_exception_is_still_needed() -> None:
    """An exception whose import went away is removed from the table, not left to cover a later one."""
    graph = import_graph()
    assert [pair for pair in EXCEPTIONS if pair[1] not in graph.get(pair[0], set())] == []


def test_only_the_entry_points_import_the_test_kit() -> None:
    importers = {module for module, imports in import_graph().items()
                 if not within(module, "minikafka.testkit") and any(within(i, "minikafka.testkit") for i in imports)}
    assert importers == {"minikafka.cli", "minikafka.pytest_plugin", "minikafka.testing"}


@pytest.mark.parametrize(("path", "source", "expected"), [
    ("protocol/codec.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
     "    from minikafka.broker.context import RequestContext\n",
     ["minikafka.protocol.codec (minikafka.protocol) imports minikafka.broker.context"]),
    ("storage/segment.py", "def load():\n    from ..protocol import apis\n",
     ["minikafka.storage.segment (minikafka.storage) imports minikafka.protocol.apis"]),
    ("spark_export/reader.py", "import minikafka.storage.log\n",
     ["minikafka.spark_export.reader (minikafka.spark_export) imports minikafka.storage.log"]),
    ("broker/server.py", "from minikafka.testkit import faults\n",
     ["minikafka.broker.server (minikafka.broker) imports minikafka.testkit.faults"]),
    ("replicas.py", "", ["minikafka.replicas is in no layer"]),
])
def test_the_check_fails_on_a_forbidden_import(tmp_path: Path, path: str, source: str,
                                              expected: list[str]) -> None:
    """A package laid out like minikafka's, with one module that imports across the layers."""
    root = tmp_path / "minikafka"
    for module in ("__init__.py", "protocol/__init__.py", "protocol/apis.py", "broker/__init__.py",
                   "broker/context.py", "storage/__init__.py", "storage/log.py", "storage/batch.py",
                   "spark_export/__init__.py", "testkit/__init__.py", "testkit/faults.py"):
        (root / module).parent.mkdir(parents=True, exist_ok=True)
        (root / module).write_text("")
    (root / "spark_export" / "fine.py").write_text("from minikafka.storage import batch\n")
    graph = import_graph(root)
    assert violations(graph) == []
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text(source)
    assert violations(import_graph(root)) == expected
