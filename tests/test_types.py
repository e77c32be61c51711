"""The code base type-checks: `mypy` with the settings in pyproject.toml ([tool.mypy]: strict on
storage and protocol, the default rules plus unannotated bodies elsewhere)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_reports_no_errors() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "minikafka"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
