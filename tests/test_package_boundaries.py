"""The broker is only the broker: nothing under ``minikafka/broker/`` reaches the test kit.

The walk reads the import statements of the source (every one: top level, inside functions,
under ``TYPE_CHECKING``) and follows minikafka's own modules transitively, so an import through a
third module counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parent.parent / "minikafka"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def module_path(name: str) -> Path | None:
    base = PACKAGE_ROOT.parent.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def imported_modules(path: Path) -> set[str]:
    """The absolute names of the minikafka modules ``path`` imports (``from x import y``: x.y if
    that is a module, else x)."""
    name = module_name(path)
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
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names
                         if module_path(f"{target}.{alias.name}") is not None)
    return {m for m in found if m == "minikafka" or m.startswith("minikafka.")}


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
