"""Every code block of README.md and docs/*.md does what the text says, run as written.

Each block carries a mark (``<!-- check: KIND -->`` on the line before its fence; the kinds are in
tests/doc_blocks.py) and is run or checked by its kind. A block without a mark fails here, so a new
example cannot go unchecked; Docker blocks are run by tests/test_docker.py.
"""

from __future__ import annotations

import configparser
import json
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.doc_blocks import KINDS, ROOT, DocBlock, doc_blocks

BLOCKS = doc_blocks()
VENV_BIN = Path(sys.executable).parent
TIMEOUT = 300


def blocks_of(*kinds: str) -> list[DocBlock]:
    return [block for block in BLOCKS if block.kind in kinds]


def env_with_venv(**extra: str) -> dict[str, str]:
    """The environment of a user whose virtualenv is active (its bin first on PATH)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MINIKAFKA_")}
    return {**env, "PATH": f"{VENV_BIN}:{env['PATH']}", "PYTHONPATH": str(ROOT), **extra}


def run(args: list[str], block: DocBlock, cwd: Path, env: dict[str, str] | None = None,
        timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                            env=env or env_with_venv())
    assert result.returncode == 0, f"{block.name} failed ({result.returncode}):\n{block.text}\n" \
                                   f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def test_every_block_is_marked_with_a_known_kind() -> None:
    unmarked = [block.name for block in BLOCKS if block.kind not in KINDS]
    assert not unmarked, f"mark these blocks with <!-- check: KIND --> (kinds: {', '.join(KINDS)}): {unmarked}"


# ----------------------------------------------------------------------------- run as written
@pytest.mark.parametrize("block", blocks_of("run"), ids=lambda b: b.name)
def test_runnable_block_runs(block: DocBlock, tmp_path: Path) -> None:
    if block.lang == "python":
        run([sys.executable, "-W", "ignore::DeprecationWarning", "-c", block.text], block, tmp_path)
    else:
        run(["bash", "-euo", "pipefail", "-c", block.text], block, tmp_path)


class Broker:
    """``minikafka serve`` on free ports, in the place of the docs' 127.0.0.1:9092 (admin 9093)."""

    def __init__(self, data_dir: Path) -> None:
        self.process = subprocess.Popen(
            [str(VENV_BIN / "minikafka"), "serve", "--port", "0", "--admin-port", "0", "--data-dir", str(data_dir),
             "--log-level", "WARNING"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            env=env_with_venv())
        assert self.process.stdout is not None
        self.bootstrap = self.process.stdout.readline().strip().rsplit(" ", 1)[-1]
        self.admin = self.process.stdout.readline().strip().rsplit(" ", 1)[-1]
        assert re.fullmatch(r"127\.0\.0\.1:\d+", self.bootstrap) and re.fullmatch(r"127\.0\.0\.1:\d+", self.admin)

    def substitute(self, text: str) -> str:
        return text.replace("127.0.0.1:9092", self.bootstrap).replace("localhost:9093", self.admin)

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.communicate(timeout=30)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    served = Broker(tmp_path / "broker-data")
    yield served
    served.stop()


@pytest.mark.parametrize("block", blocks_of("broker"), ids=lambda b: b.name)
def test_block_runs_against_a_broker(block: DocBlock, broker: Broker, tmp_path: Path) -> None:
    text = broker.substitute(block.text)
    if block.lang == "python":
        run([sys.executable, "-W", "ignore::DeprecationWarning", "-c", text], block, tmp_path)
    else:
        run(["bash", "-euo", "pipefail", "-c", text], block, tmp_path)


@pytest.mark.parametrize("block", blocks_of("pytest"), ids=lambda b: b.name)
def test_pytest_block_passes_in_a_project_with_the_documented_ini(block: DocBlock, tmp_path: Path) -> None:
    ini = [b for b in BLOCKS if b.kind == "pytest-ini" and b.path == block.path]
    assert len(ini) <= 1, "one ini block per document"
    (tmp_path / "pytest.ini").write_text(ini[0].text if ini else "[pytest]\n")
    (tmp_path / "test_from_docs.py").write_text(block.text)
    # -W error: a user's strict suite; -p no:cacheprovider keeps the scratch project clean
    result = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error",
                  "test_from_docs.py"], block, tmp_path)
    assert re.search(r"\b[1-9]\d* passed\b", result.stdout) and "failed" not in result.stdout, result.stdout


@pytest.mark.parametrize("block", blocks_of("pytest-ini", "data"), ids=lambda b: b.name)
def test_data_block_parses(block: DocBlock) -> None:
    if block.lang == "yaml":
        data = yaml.safe_load(block.text)
        if "rules" in data:  # a fault-rule file: every rule is valid
            from minikafka.testkit.faults import FaultRule

            for spec in data["rules"]:
                FaultRule.from_dict(spec)
    elif block.lang == "json":
        json.loads(block.text)
    elif block.lang == "ini":
        configparser.ConfigParser().read_string(block.text)
    else:
        pytest.fail(f"{block.name}: data blocks are yaml, json or ini, not {block.lang!r}")


@pytest.mark.parametrize("block", blocks_of("file"), ids=lambda b: b.name)
def test_file_block_is_the_file_it_names(block: DocBlock) -> None:
    first, _, content = block.text.partition("\n")
    path = ROOT / first.lstrip("# ").strip()
    lines = path.read_text().splitlines()
    missing = [line for line in content.splitlines() if line.strip() and line not in lines]
    assert not missing, f"{block.name}: {path} has no line {missing}"


# ----------------------------------------------------------------------------- usage lines
def command_lines(block: DocBlock) -> list[str]:
    """The commands of a block: its ``$ `` lines, or else all of it (continuations joined,
    trailing comments dropped)."""
    text = re.sub(r"\\?\n(?=[ \t])", " ", block.text)  # a line continued by indentation (or a backslash)
    lines = [line[2:] for line in text.splitlines() if line.startswith("$ ")]
    if not lines:
        lines = [line.split("  #", 1)[0] for line in text.splitlines() if line.strip()]
    return [line.strip() for line in lines]


def program_and_flags(line: str) -> tuple[list[str], list[str], list[str]]:
    """(program words, --flags, KEY=VALUE after --config) of a command line."""
    words = shlex.split(line.replace("[", " ").replace("]", " ").replace("|", " "))
    skip = 2 if len(words) > 2 and words[1] == "-m" else 0  # python -m module: the module is the program
    first_option = next((i for i, w in enumerate(words) if w.startswith("-") and i >= skip), len(words))
    program = words[:first_option]
    flags = sorted({w.split("=", 1)[0] for w in words[first_option:] if w.startswith("--")})
    configs = [words[i + 1] for i, w in enumerate(words[:-1]) if w == "--config"]
    if program and program[0] in (".venv/bin/python", "python", "python3"):
        program = [sys.executable, *program[1:]]
    elif program and program[0] == "minikafka":
        program = [str(VENV_BIN / "minikafka"), *program[1:]]
    return program, flags, configs


@pytest.mark.parametrize("block", blocks_of("usage"), ids=lambda b: b.name)
def test_usage_block_uses_only_flags_and_settings_the_program_has(block: DocBlock) -> None:
    from minikafka.config import parse_settings

    for line in command_lines(block):
        program, flags, configs = program_and_flags(line)
        result = run([*program, "--help"], block, ROOT)
        for flag in flags:
            assert re.search(rf"(^|[\s,\[]){re.escape(flag)}\b", result.stdout), f"{block.name}: {line}: no {flag}"
        parse_settings(dict(item.split("=", 1) for item in configs))  # unknown or bad settings raise
        for path in repository_paths(line):
            assert any(ROOT.glob(path)), f"{block.name}: {line}: no {path} in the repository"


def repository_paths(line: str) -> list[str]:
    """The paths into the repository's tests/ and bench/ a command line names (``--ignore=tests/x``,
    ``tests/x.py::test_y`` give ``tests/x``, ``tests/x.py``)."""
    words = [word.split("=", 1)[-1].split("::", 1)[0] for word in shlex.split(line)]
    return [word.rstrip("/") for word in words if word.startswith(("tests/", "bench/"))]


# ----------------------------------------------------------------------------- set-up and CI
def test_readme_keeps_exactly_two_set_up_commands_and_ci_runs_the_second() -> None:
    readme = [b for b in BLOCKS if b.path.name == "README.md"]
    assert [b.kind for b in readme if b.kind in ("setup", "ci")] == ["setup", "ci"]
    ci_block = next(b for b in readme if b.kind == "ci")
    ci_script = (ROOT / ".ci" / "run").read_text()
    assert ci_block.text.strip() in ci_script.splitlines(), "README's test command is not what .ci/run runs"


@pytest.mark.parametrize("block", blocks_of("ci"), ids=lambda b: b.name)
def test_ci_block_is_what_ci_runs(block: DocBlock) -> None:
    assert block.text.strip() in (ROOT / ".ci" / "run").read_text().splitlines(), f"{block.name} is not in .ci/run"


@pytest.mark.parametrize("block", blocks_of("setup"), ids=lambda b: b.name)
def test_set_up_command_starts_a_broker_from_a_fresh_copy(block: DocBlock, tmp_path: Path) -> None:
    # a fresh clone (the files git knows), the command as written; MINIKAFKA_PORT=0 only so that it
    # cannot collide with a broker someone runs on 9092 on this machine
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True, timeout=60).stdout.split()
    for name in listed:
        if (ROOT / name).is_file():
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tmp_path / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MINIKAFKA_", "PYTHON", "VIRTUAL_ENV"))}
    process = subprocess.Popen(["bash", "-c", block.text], cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env={**env, "MINIKAFKA_PORT": "0"},
                               start_new_session=True)
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + TIMEOUT
        line = ""
        while time.monotonic() < deadline and process.poll() is None:
            if select.select([process.stdout], [], [], 0.5)[0]:
                line = process.stdout.readline()
                if line.startswith("minikafka listening on ") or not line:
                    break
        assert line.startswith("minikafka listening on "), \
            f"{block.name}: no broker:\n{line}{process.stderr.read() if process.poll() is not None else ''}"
        port = line.strip().rsplit(":", 1)[1]
        ping = subprocess.run([str(tmp_path / ".venv" / "bin" / "minikafka"), "ping", "--port", port],
                              capture_output=True, text=True, timeout=30)
        assert ping.returncode == 0, ping.stderr
        assert (tmp_path / "minikafka-data" / "meta.properties").exists()
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


# ----------------------------------------------------------------------------- Spark
@pytest.mark.parametrize("block", blocks_of("spark"), ids=lambda b: b.name)
def test_spark_block_runs_on_a_real_data_dir(block: DocBlock, tmp_path: Path) -> None:
    # the docs read the broker's data dir, /var/lib/minikafka: a data dir with those topics takes its place
    from minikafka.testkit import MiniKafka

    data_dir = tmp_path / "data"
    with MiniKafka(data_dir=data_dir) as kafka:
        for topic in ("orders", "payments"):
            kafka.create_topic(topic)
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": kafka.bootstrap})
        for topic in ("orders", "payments"):
            producer.produce(topic, value=b"v", headers=[("h", b"1")])
        assert producer.flush(10) == 0
    text = block.text.replace('"/var/lib/minikafka"', repr(str(data_dir)))
    result = run([sys.executable, "-c", text], block, tmp_path, timeout=600)
    assert "orders" in result.stdout and "payments" in result.stdout, result.stdout
