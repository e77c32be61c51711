"""Fault-rule files (JSON or YAML) for ``minikafka serve --faults`` and the test kit.

:func:`load_rules` reads a file and checks every rule in it as the broker would, so a bad file
is refused before any broker starts, with one line that names the file, the rule and what is
wrong with it (a misspelt API name gets the close ones).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from minikafka.testkit.fault_rules import FaultRuleError, check_rules, rule_specs

if TYPE_CHECKING:
    from minikafka.broker.dispatch import ApiSpec


class FaultFileRuleError(FaultRuleError):
    """A rule file that cannot be parsed or holds a rule that cannot be used; ``detail`` is the
    message without the file's name, for a caller that names the file its own way."""

    def __init__(self, path: str | Path, detail: str) -> None:
        super().__init__(f"{path}: {detail}")
        self.path, self.detail = str(path), detail


def load_rules(path: str | Path, api_table: Mapping[int, ApiSpec] | None = None,
               node_ids: Collection[int] | None = None) -> list[dict[str, Any]]:
    """Rule specs from a JSON or YAML file: a list of rules, or ``{"rules": [...]}``.

    Every rule is checked as :meth:`FaultRuleSet.add_all` would check it (against ``api_table``,
    by default the APIs minikafka serves, and the brokers ``node_ids`` its ``broker`` and
    ``from_broker`` may name, when given), so a bad file fails here, before any broker starts, with
    a :class:`FaultFileRuleError` naming the rule. A file that cannot be read raises ``OSError``.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise FaultFileRuleError(path, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        specs = rule_specs(_parse_rule_file(path, text))
        if api_table is None:
            from minikafka.broker.dispatch import build_api_table

            api_table = build_api_table()
        check_rules(specs, api_table, label_each=True, node_ids=node_ids)
    except FaultFileRuleError:
        raise
    except FaultRuleError as exc:
        raise FaultFileRuleError(path, str(exc)) from None
    return specs


def _parse_rule_file(path: Path, text: str) -> Any:
    if path.suffix.lower() not in (".yaml", ".yml"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise FaultFileRuleError(path, f"not valid JSON: {exc}") from None
    try:
        import yaml
    except ImportError:
        raise FaultFileRuleError(path, "reading YAML needs PyYAML (pip install pyyaml)") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise FaultFileRuleError(path, f"not valid YAML: {_yaml_problem(exc)}") from None


def _yaml_problem(exc: Exception) -> str:
    """PyYAML's multi-line report as one line: what it expected, what it found, and where."""
    problem = getattr(exc, "problem", None)
    if problem is None:
        return " ".join(str(exc).split())
    context = getattr(exc, "context", None)
    mark = getattr(exc, "problem_mark", None)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    return f"{context}: {problem}{where}" if context else f"{problem}{where}"
