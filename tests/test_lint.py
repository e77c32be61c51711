"""The code base stays `ruff check` clean."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_check_reports_no_problems() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "minikafka", "pyspark_minikafka", "tests", "bench"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
