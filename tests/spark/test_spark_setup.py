"""Setting up Spark as a new user would: which Python the workers run, what ``minikafka export``
says before it starts Spark, and what a wrong data directory gives.

The command-line tests run the real ``minikafka`` entry point in a subprocess and check the exit
code and the one line it prints.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from minikafka.spark_export.errors import ExportOptionError
from minikafka.spark_export.options import parse_options
from minikafka.spark_export.planner import plan
from tests.doc_blocks import the_block
from tests.spark.spark_helpers import LogDirWriter, build_batch

ROOT = Path(__file__).resolve().parents[2]
MINIKAFKA = str(Path(sys.executable).with_name("minikafka"))
T0 = 1_700_000_000_000


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env.update({"PYTHONPATH": str(ROOT), "SPARK_LOCAL_IP": "127.0.0.1"})
    env.update(extra)
    return env


def _logdir(root: Path, n: int = 5) -> str:
    w = LogDirWriter(str(root))
    for i in range(n):
        w.append("t", 0, build_batch([(b"k%d" % i, b"v%d" % i, T0 + i, [])]))
    w.close()
    return str(root)


def _export(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MINIKAFKA, "export", *argv], env=env or _env(), capture_output=True, text=True,
                          timeout=300)


def _one_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def test_export_without_the_spark_extra_says_what_to_install(tmp_path):
    # Shadow the spark extra's packages with ones that fail to import, as on an install without it.
    blocked = tmp_path / "blocked"
    for name in ("numpy", "pyarrow", "pyspark"):
        (blocked / name).mkdir(parents=True)
        (blocked / name / "__init__.py").write_text(f"raise ModuleNotFoundError(\"No module named '{name}'\")\n")
    env = _env(PYTHONPATH=f"{blocked}{os.pathsep}{ROOT}")
    result = _export("--data-dir", _logdir(tmp_path / "d"), "--out", str(tmp_path / "out"), env=env)
    assert result.returncode == 2
    assert "pip install 'minikafka[spark]'" in _one_line(result)


def test_export_refuses_an_existing_out_before_starting_spark(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    result = _export("--data-dir", _logdir(tmp_path / "d"), "--out", str(out), "--no-progress")
    assert result.returncode == 2
    line = _one_line(result)
    assert f"--out {out} already exists" in line and "--mode overwrite" in line
    assert "[export]" not in result.stderr  # refused before planning, so before Spark


@pytest.mark.parametrize("kind", ["file", "not a data dir", "partition dir", "missing"])
def test_wrong_data_directories_get_a_clear_error(tmp_path, kind):
    data = _logdir(tmp_path / "d")
    path = {
        "file": os.path.join(data, "t-0", "00000000000000000000.log"),
        "not a data dir": str(tmp_path),  # holds the data dir, but is not one
        "partition dir": os.path.join(data, "t-0"),
        "missing": str(tmp_path / "nope"),
    }[kind]
    message = {
        "file": "is a file; load the broker's data directory",
        "not a data dir": "is not a minikafka or Kafka data directory (it has no meta.properties)",
        "partition dir": "looks like one partition's directory",
        "missing": "data directory not found",
    }[kind]
    with pytest.raises(ExportOptionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        plan(parse_options({"path": path}))
    result = _export("--data-dir", path, "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert message in _one_line(result)


def test_worker_python_is_the_one_with_minikafka_or_a_clear_error(tmp_path):
    """Run as ``venv/bin/python script.py`` without activating the venv: PATH's python3 lacks
    minikafka. register() makes the source's workers run this interpreter; an explicit
    PYSPARK_PYTHON that cannot import minikafka is refused with a message saying what to set."""
    data = _logdir(tmp_path / "d", 7)
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "python3").symlink_to("/usr/bin/python3")  # a Python without minikafka, pyspark or pyarrow
    script = (
        "import os, sys\n"
        "from pyspark.sql import SparkSession\n"
        "from minikafka.spark_export import register, WorkerPythonError\n"
        "s = (SparkSession.builder.master('local[1]').config('spark.ui.enabled', 'false')\n"
        "     .config('spark.ui.showConsoleProgress', 'false').getOrCreate())\n"
        "if sys.argv[1] == 'explicit':\n"
        "    try:\n"
        "        register(s)\n"
        "    except WorkerPythonError as exc:\n"
        "        print('REFUSED', exc)\n"
        "else:\n"
        "    register(s)\n"
        f"    print('COUNT', s.read.format('minikafka').load({data!r}).count())\n"
        "    print('UDF_PYTHON', s.sparkContext.pythonExec)\n"
        "s.stop()\n"
    )
    path = f"{bare}{os.pathsep}{os.environ['PATH']}"
    result = subprocess.run([sys.executable, "-c", script, "default"], env=_env(PATH=path), cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert "COUNT 7" in result.stdout, result.stderr[-3000:]
    assert "UDF_PYTHON python3" in result.stdout  # the session's own setting is left alone

    result = subprocess.run([sys.executable, "-c", script, "explicit"],
                            env=_env(PATH=path, PYSPARK_PYTHON="/usr/bin/python3"), cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    refused = [line for line in result.stdout.splitlines() if line.startswith("REFUSED")]
    assert refused, result.stderr[-3000:]
    assert "'/usr/bin/python3'" in refused[0] and "cannot import minikafka" in refused[0]
    assert sys.executable in refused[0]


def test_docs_example_run_from_the_checkout_prints_no_lookup_traceback(tmp_path):
    """Spark looks up ``pyspark_*`` data sources once per JVM with python3 from PATH, which, run from
    the repository root, finds the checkout's ``pyspark_minikafka`` but not minikafka's
    dependencies. The lookup must pass over it quietly; the example's rows are right."""
    w = LogDirWriter(str(tmp_path / "d"))
    counts = {"orders": 3, "payments": 2, "audit": 4}  # audit is not subscribed
    for topic, n in counts.items():
        for i in range(n):
            w.append(topic, i % 2, build_batch([(b"k", b"v%d" % i, T0 + i, [("h", b"1")])]))
    w.close()
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "python3").symlink_to("/usr/bin/python3")  # first on PATH: no numpy, pyarrow or crc32c
    lacks = subprocess.run([str(bare / "python3"), "-c", "import numpy, pyarrow, crc32c"], capture_output=True)
    assert lacks.returncode != 0
    code = the_block(ROOT / "docs" / "spark.md", "spark", "register(spark)").text
    code = code.replace('"/var/lib/minikafka"', repr(str(tmp_path / "d")))
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600,
                            env=_env(PATH=f"{bare}{os.pathsep}{os.environ['PATH']}"))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "Traceback" not in output and "Skipping the lookup" not in output, output[-3000:]
    rows = dict(re.findall(r"^\|\s*(\w+)\|\s*(\d+)\|$", result.stdout, re.MULTILINE))
    assert rows == {"orders": "3", "payments": "2"}, result.stdout


def _empty_data_dir(root: Path) -> str:
    LogDirWriter(str(root)).close()  # meta.properties and nothing else
    return str(root)


@pytest.mark.parametrize("case", ["missing topic", "misspelt topic", "no match", "no topics"])
def test_export_of_nothing_says_which_topics_exist_before_starting_spark(tmp_path, case):
    data = _empty_data_dir(tmp_path / "empty") if case == "no topics" else _logdir(tmp_path / "d")
    argv = {"missing topic": ["--topics", "nosuchtopic"], "misspelt topic": ["--topics", "t,tt"],
            "no match": ["--pattern", "x.*"], "no topics": []}[case]
    message = {"missing topic": f"no topic named nosuchtopic in {data}; its topics are t",
               "misspelt topic": f"no topic named tt in {data} (did you mean t?); its topics are t",
               "no match": f"no topic in {data} matches 'x.*'; its topics are t",
               "no topics": f"{data} holds no topics"}[case]
    result = _export("--data-dir", data, "--out", str(tmp_path / "out"), *argv)
    assert result.returncode == 2
    assert _one_line(result) == f"minikafka export: {message}"  # refused before the plan line and Spark
    assert not (tmp_path / "out").exists()


def test_export_refuses_a_misspelt_option_before_starting_spark(tmp_path):
    result = _export("--data-dir", _logdir(tmp_path / "d"), "--out", str(tmp_path / "out"),
                     "--option", "maxRecordPerPartition=10")
    assert result.returncode == 2
    line = _one_line(result)  # the closest name first
    assert "unknown option for the minikafka source: 'maxrecordperpartition' (did you mean " \
           "maxRecordsPerPartition or" in line, line


def test_export_of_an_empty_range_counts_the_task_spark_runs(tmp_path):
    """A read that plans no input partition still runs one (empty) Spark task: the plan line says
    so, and the summary counts the tasks that ran."""
    data = _logdir(tmp_path / "d", 5)
    result = _export("--data-dir", data, "--out", str(tmp_path / "out"), "--topics", "t",
                     "--starting-offsets", '{"t":{"0":5}}')
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if line.startswith("[export]")]
    assert "0 slices in 1 tasks" in lines[0] and "up to 0 records" in lines[0], lines
    assert re.search(r"^\[export\] done in [\d.]+ s, 1/1 tasks .*, 0 records in the output$", lines[-1]), lines
