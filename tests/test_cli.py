"""The ``minikafka`` command as a user meets it: the real console script in a subprocess.

Every mistake at start-up is one line on stderr that names the setting, the value and what is
expected, with an exit code for its kind (listed in ``minikafka serve --help``), and leaves the
data dir untouched.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import minikafka
from minikafka.startup_errors import EXIT_CODES

ROOT = Path(__file__).resolve().parent.parent
MINIKAFKA = Path(sys.executable).parent / "minikafka"  # the console script pip installed


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MINIKAFKA_")}
    return {**env, "PYTHONPATH": str(ROOT), **extra}


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(MINIKAFKA), *args], capture_output=True, text=True, timeout=timeout,
                          env=cli_env(**(env or {})))


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{result.stderr}"
    assert "Traceback" not in result.stderr
    return lines[0]


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


# (arguments after `serve --data-dir D`, environment, exit code, fragments of the one line)
REFUSED_STARTS = {
    "setting that is not a number": (["--port", "0", "--config", "num.partitions=abc"], {}, 2,
                                     ["num.partitions", "'abc'", "expected an integer"]),
    "misspelt setting": (["--port", "0", "--config", "num.partition=3"], {}, 2,
                         ["num.partition=3", "unknown broker setting", "did you mean num.partitions"]),
    "unknown setting": (["--port", "0", "--config", "foo.bar=1"], {}, 2, ["foo.bar=1", "unknown broker setting"]),
    "setting out of range": (["--port", "0", "--config", "num.partitions=-1"], {}, 2,
                             ["num.partitions=-1", "expected at least 1"]),
    "setting without a value": (["--port", "0", "--config", "num.partitions"], {}, 2,
                                ["--config", "'num.partitions'", "KEY=VALUE"]),
    "bad setting from the environment": (["--port", "0"], {"MINIKAFKA_NUM_PARTITIONS": "many"}, 2,
                                         ["MINIKAFKA_NUM_PARTITIONS", "'many'", "expected an integer"]),
    "unknown log level": (["--port", "0", "--log-level", "LOUD"], {}, 2,
                          ["--log-level", "'LOUD'", "DEBUG, INFO, WARNING"]),
    "port that is not a number in the environment": ([], {"MINIKAFKA_PORT": "abc"}, 2,
                                                     ["MINIKAFKA_PORT", "'abc'", "port number from 0 to 65535"]),
    "negative port": (["--port", "-1"], {}, 2, ["--port", "'-1'", "from 0 to 65535"]),
    "port above 65535": (["--port", "99999"], {}, 2, ["--port", "'99999'", "from 0 to 65535"]),
    "admin port above 65535": (["--port", "0", "--admin-port", "99999"], {}, 2,
                               ["--admin-port", "'99999'", "from 0 to 65535"]),
    "advertised port above 65535": (["--port", "0", "--advertised-port", "70000"], {}, 2,
                                    ["--advertised-port", "'70000'"]),
    "host that is not an address of this machine": (["--port", "0", "--host", "1.2.3.4"], {}, 3,
                                                    ["--host 1.2.3.4", "not an address of this machine"]),
    "host that does not resolve": (["--port", "0", "--host", "no-such-host.invalid"], {}, 3,
                                   ["--host no-such-host.invalid", "unknown host"]),
    "TLS listener without key material": (["--config", "listeners=SSL://127.0.0.1:0"], {}, 5,
                                          ["listener SSL", "ssl.keystore.location"]),
    "misspelt setting in the environment": (["--port", "0"], {"MINIKAFKA_NUM_PARTITION": "3"}, 2,
                                            ["MINIKAFKA_NUM_PARTITION: unknown environment variable",
                                             "did you mean MINIKAFKA_NUM_PARTITIONS?"]),
    "misspelt serve variable": (["--port", "0"], {"MINIKAFKA_PROT": "9100"}, 2,
                                ["MINIKAFKA_PROT: unknown environment variable", "did you mean MINIKAFKA_PORT?"]),
    "unknown variable": (["--port", "0"], {"MINIKAFKA_WIBBLE": "1"}, 2,
                         ["MINIKAFKA_WIBBLE: unknown environment variable", "minikafka serve --help"]),
    "--port beside listeners": (["--port", "9200", "--config", "listeners=PLAINTEXT://127.0.0.1:9100"], {}, 2,
                                ["--port 9200", "--config listeners=PLAINTEXT://127.0.0.1:9100", "one or the other"]),
    "--port beside listeners from the environment": (
        ["--port", "9200"], {"MINIKAFKA_LISTENERS": "PLAINTEXT://127.0.0.1:9100"}, 2,
        ["--port 9200", "MINIKAFKA_LISTENERS=PLAINTEXT://127.0.0.1:9100", "one or the other"]),
    "SASL users file that is missing": (
        ["--config", "listeners=SASL_PLAINTEXT://127.0.0.1:0",
         "--config", "minikafka.sasl.users.file=/nonexistent/users.json"], {}, 5,
        ["minikafka.sasl.users.file", "/nonexistent/users.json"]),
}


@pytest.mark.parametrize("case", list(REFUSED_STARTS))
def test_a_start_up_mistake_is_one_line_with_its_exit_code_and_leaves_no_data_dir(case: str, tmp_path: Path) -> None:
    args, env, code, fragments = REFUSED_STARTS[case]
    data_dir = tmp_path / "data"
    result = run_cli("serve", "--data-dir", str(data_dir), *args, env=env)
    line = one_line(result)
    assert result.returncode == code, (result.returncode, line)
    for fragment in fragments:
        assert fragment in line, (fragment, line)
    assert not data_dir.exists()


def test_a_port_in_use_is_refused_before_the_data_dir_is_touched(tmp_path: Path, busy_port: int) -> None:
    result = run_cli("serve", "--port", str(busy_port), "--data-dir", str(tmp_path / "data"))
    line = one_line(result)
    assert result.returncode == 3
    assert f"--port {busy_port}" in line and "already in use" in line
    assert not (tmp_path / "data").exists()


def test_an_admin_port_in_use_is_refused_before_announcing_or_touching_the_data_dir(
        tmp_path: Path, busy_port: int) -> None:
    result = run_cli("serve", "--port", "0", "--admin-port", str(busy_port), "--data-dir", str(tmp_path / "data"))
    line = one_line(result)
    assert result.returncode == 3
    assert f"--admin-port {busy_port}" in line and "already in use" in line
    assert "listening" not in result.stdout
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("layout", ["file", "under a file"])
def test_a_data_dir_that_is_a_file_is_refused(tmp_path: Path, layout: str) -> None:
    (tmp_path / "file").write_text("not a directory")
    data_dir = tmp_path / "file" if layout == "file" else tmp_path / "file" / "data"
    result = run_cli("serve", "--port", "0", "--data-dir", str(data_dir))
    line = one_line(result)
    assert result.returncode == 4
    assert f"--data-dir {data_dir}" in line and "expected a directory" in line
    assert (tmp_path / "file").read_text() == "not a directory"


def test_a_data_dir_that_is_not_writable_is_refused(tmp_path: Path) -> None:
    parent = tmp_path / "read-only"
    parent.mkdir(mode=0o500)
    command = [str(MINIKAFKA), "serve", "--port", "0", "--data-dir", str(parent / "data")]
    if os.geteuid() == 0:  # root writes anywhere: take away the capability that lets it
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv (util-linux) to drop CAP_DAC_OVERRIDE")
        drop = "-dac_override,-dac_read_search"
        command = [setpriv, f"--bounding-set={drop}", f"--inh-caps={drop}", *command]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, env=cli_env())
    line = one_line(result)
    assert result.returncode == 4
    assert f"--data-dir {parent / 'data'}" in line and "not writable" in line
    assert list(parent.iterdir()) == []


def test_a_damaged_group_configs_file_is_one_line_and_nothing_written(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "minikafka-group-configs.json").write_text("{")
    result = run_cli("serve", "--port", "0", "--data-dir", str(data_dir))
    line = one_line(result)
    assert result.returncode == 4
    assert "minikafka-group-configs.json: not a minikafka group configs file" in line
    assert sorted(p.name for p in data_dir.iterdir()) == ["minikafka-group-configs.json"]


def test_a_data_dir_of_another_node_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    meta = data_dir / "meta.properties"
    meta.write_text("version=1\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\nnode.id=7\n")
    result = run_cli("serve", "--port", "0", "--node-id", "1", "--data-dir", str(data_dir))
    line = one_line(result)
    assert result.returncode == 4
    assert "node.id 7" in line
    assert sorted(p.name for p in data_dir.iterdir()) == ["meta.properties"]
    assert meta.read_text() == "version=1\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\nnode.id=7\n"


def test_a_bad_faults_file_has_its_own_exit_code(tmp_path: Path) -> None:
    result = run_cli("serve", "--port", "0", "--data-dir", str(tmp_path / "data"), "--faults",
                     str(tmp_path / "missing.yaml"))
    assert result.returncode == 6
    assert "--faults" in one_line(result)
    assert not (tmp_path / "data").exists()


# file name, its text, fragments of the one line after "--faults PATH: " (or "MINIKAFKA_FAULTS=PATH: ")
BAD_FAULT_FILES = {
    "misspelt API name": ("faults.yaml", "- action: close\n- action: close\n  api: Prodcue\n",
                          ["rule 2", "unknown API 'Prodcue'", "did you mean Produce?"]),
    "unknown API key": ("faults.yaml", "rules:\n  - id: ninety-nine\n    action: close\n    api: 99\n",
                        ["rule 1 (id 'ninety-nine')", "does not serve API key 99", "0-3"]),
    "YAML that does not parse": ("faults.yaml", "- action: close\n  api: [Produce\n",
                                 ["not valid YAML", "expected ',' or ']'", "line 3"]),
    "two rules with one id": ("faults.json", '[{"id": "a", "action": "close"}, {"id": "a", "action": "close"}]',
                              ["rule 2 (id 'a')", "exists already"]),
    "a rule that is not an object": ("faults.json", '[{"action": "close"}, "close"]',
                                     ["rule 2", "expected an object"]),
}


@pytest.mark.parametrize("given", ["--faults", "MINIKAFKA_FAULTS"])
@pytest.mark.parametrize("case", list(BAD_FAULT_FILES))
def test_a_bad_rule_file_is_one_line_naming_the_file_and_the_rule_with_exit_6(
        case: str, given: str, tmp_path: Path) -> None:
    name, text, fragments = BAD_FAULT_FILES[case]
    rules = tmp_path / name
    rules.write_text(text)
    flag = ["--faults", str(rules)] if given == "--faults" else []
    env = {"MINIKAFKA_FAULTS": str(rules)} if given == "MINIKAFKA_FAULTS" else {}
    result = run_cli("serve", "--port", "0", "--data-dir", str(tmp_path / "data"), *flag, env=env)
    line = one_line(result)
    assert result.returncode == 6, (result.returncode, line)
    named = f"--faults {rules}: " if given == "--faults" else f"MINIKAFKA_FAULTS={rules}: "
    assert line.startswith(f"minikafka: {named}"), line
    for fragment in fragments:
        assert fragment in line, (fragment, line)
    assert not (tmp_path / "data").exists()


def test_every_variable_the_project_reads_is_accepted_by_serve(tmp_path: Path) -> None:
    from minikafka.config import VARIABLES

    rules = tmp_path / "faults.json"
    rules.write_text('[{"action": "close", "api": "DescribeCluster"}]')
    values = {
        "MINIKAFKA_HOST": "127.0.0.1", "MINIKAFKA_PORT": "0", "MINIKAFKA_DATA_DIR": str(tmp_path / "data"),
        "MINIKAFKA_NODE_ID": "3", "MINIKAFKA_ADVERTISED_HOST": "127.0.0.1", "MINIKAFKA_ADVERTISED_PORT": "",
        "MINIKAFKA_LOG_LEVEL": "WARNING", "MINIKAFKA_FAULTS": str(rules), "MINIKAFKA_ADMIN_PORT": "0",
        "MINIKAFKA_ADMIN_HOST": "127.0.0.1", "MINIKAFKA_FSYNC": "false", "MINIKAFKA_EAGER_IMPORTS": "0",
        "MINIKAFKA_BASE_IMAGE": "localhost/ci/debian-python:bookworm", "MINIKAFKA_IMAGE": "localhost/minikafka:test",
        "MINIKAFKA_CI_CACHE": str(tmp_path / "cache"), "MINIKAFKA_NUM_PARTITIONS": "2",
        "MINIKAFKA_ADDRESS_FILE": str(tmp_path / "address"), "MINIKAFKA_BROKERS": "1",
    }
    assert set(VARIABLES) <= set(values), set(VARIABLES) - set(values)  # a new variable gets a value here
    served = start_serve(tmp_path, env=values)
    try:
        assert ping("--port", str(served.port)).returncode == 0
    finally:
        stderr = stop_serve(served)
    assert stderr == ""
    assert "node.id=3" in (tmp_path / "data" / "meta.properties").read_text()


def test_every_minikafka_variable_named_in_the_project_is_in_the_table() -> None:
    """Code, image, scripts and docs name no MINIKAFKA_ variable that serve would refuse."""
    import io
    import re
    import tokenize

    from minikafka.config import BROKER_DEFAULTS, VARIABLES, setting_variable

    known = set(VARIABLES) | {setting_variable(name) for name in BROKER_DEFAULTS}
    name = re.compile(r"MINIKAFKA_[A-Z0-9_]*[A-Z0-9]")
    named: dict[str, str] = {}
    paths = [*ROOT.glob("minikafka/**/*.py"), *ROOT.glob("pyspark_minikafka/**/*.py"), *ROOT.glob("bench/*.py"),
             ROOT / "Dockerfile", *ROOT.glob("tests/container/*"), ROOT / "README.md", *ROOT.glob("docs/*.md")]
    for path in paths:
        text = path.read_text()
        if path.suffix == ".py":  # only strings: a Python name such as snapshot.MINIKAFKA_VERSION is no variable
            text = " ".join(tok.string for tok in tokenize.generate_tokens(io.StringIO(text).readline)
                            if tok.type == tokenize.STRING)
        named.update({found: str(path.relative_to(ROOT)) for found in name.findall(text)})
    assert {"MINIKAFKA_PORT", "MINIKAFKA_CI_CACHE", "MINIKAFKA_EAGER_IMPORTS"} <= set(named)  # the scan sees them
    assert {found: where for found, where in named.items() if found not in known} == {}


def test_port_from_the_environment_beside_listeners_starts_on_the_listeners_port(tmp_path: Path) -> None:
    # The Docker image sets MINIKAFKA_PORT=9092 for every container: a user's listeners must still start.
    listeners = "--config", "listeners=PLAINTEXT://127.0.0.1:0"
    served = start_serve(tmp_path, *listeners, env={"MINIKAFKA_PORT": "9092"})
    try:
        assert served.port != 9092
        assert ping("--port", str(served.port)).returncode == 0
    finally:
        stderr = stop_serve(served)
    warning = [line for line in stderr.splitlines() if "MINIKAFKA_PORT" in line]
    assert len(warning) == 1 and "MINIKAFKA_PORT=9092 is not used" in warning[0], stderr
    assert "--config listeners sets the ports" in warning[0] and "health check" in warning[0]


def test_an_unknown_option_points_at_the_sub_commands_help() -> None:
    result = run_cli("serve", "--prot", "1")
    assert result.returncode == 2
    assert one_line(result) == "minikafka serve: unrecognized arguments: --prot 1 (see minikafka serve --help)"


def test_a_bad_port_variable_for_ping_is_one_line_quoting_the_value_once() -> None:
    result = run_cli("ping", env={"MINIKAFKA_PORT": "abc"})
    assert result.returncode == 2
    line = one_line(result)
    assert line.startswith("minikafka: MINIKAFKA_PORT: ") and "from 0 to 65535" in line
    assert line.count("abc") == 1, line


def test_a_crash_and_restart_in_process_logs_one_summary_line(tmp_path: Path) -> None:
    # MiniKafka outside pytest (a script): Python's last-resort handler prints WARNING and above.
    script = f"""
from minikafka.testkit import MiniKafka
with MiniKafka(data_dir={str(tmp_path / "data")!r}) as kafka:
    for topic in ("a", "b", "c"):
        kafka.create_topic(topic, partitions=3)
    kafka.restart(clean=False)
    assert kafka.topics() == {{"a": 3, "b": 3, "c": 3}}
"""
    result = subprocess.run([sys.executable, "-W", "ignore::DeprecationWarning", "-c", script],
                            capture_output=True, text=True, timeout=120, env=cli_env())
    assert result.returncode == 0, result.stderr
    line = one_line(result)
    assert f"loaded 11 partition(s) of 5 topic(s) from {tmp_path / 'data'}" in line, line
    assert "UNCLEAN shutdown" in line


def test_help_lists_every_exit_code_and_a_default_for_every_serve_flag() -> None:
    result = run_cli("serve", "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    for code, meaning in EXIT_CODES.items():
        assert f"{code} {' '.join(meaning.split())}" in text
    flags = ["--host", "--port", "--data-dir", "--node-id", "--advertised-host", "--advertised-port", "--log-level",
             "--faults", "--admin-port", "--admin-host", "--address-file", "--fsync"]
    for flag, following in zip(flags, [*flags[1:], "--config"], strict=True):
        section = text[text.index(f" {flag} "):text.index(f" {following} ", text.index(f" {flag} ") + 1)]
        assert "[default:" in section and "env MINIKAFKA_" in section, section


def test_version_flag_and_start_up_line_carry_the_version(tmp_path: Path) -> None:
    result = run_cli("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"minikafka {minikafka.__version__}"
    served = start_serve(tmp_path, "--log-level", "INFO")
    try:
        assert ping("--port", str(served.port)).returncode == 0
    finally:
        stderr = stop_serve(served)
    assert f"minikafka {minikafka.__version__} node 1 listening on" in stderr


@pytest.mark.parametrize("form", ["positional", "--bootstrap", "--port", "env"])
def test_ping_takes_an_address_in_each_documented_form(tmp_path: Path, form: str) -> None:
    served = start_serve(tmp_path)
    try:
        args = {"positional": [f"127.0.0.1:{served.port}"], "--bootstrap": ["--bootstrap", f"127.0.0.1:{served.port}"],
                "--port": ["--host", "127.0.0.1", "--port", str(served.port)], "env": []}[form]
        result = ping(*args, env={"MINIKAFKA_PORT": str(served.port)} if form == "env" else {})
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip().startswith(f"minikafka at 127.0.0.1:{served.port} answers:")
    finally:
        stop_serve(served)


@pytest.mark.parametrize("address", ["127.0.0.1", "127.0.0.1:abc", "127.0.0.1:70000", "localhost:"])
def test_ping_refuses_a_malformed_address_in_one_line(address: str) -> None:
    result = ping(address)
    assert result.returncode == 2
    line = one_line(result)
    assert repr(address) in line and "expected HOST:PORT" in line


def test_ping_of_a_closed_port_fails_in_one_line() -> None:
    with socket.socket() as sock:  # bound, never listening: connections are refused
        sock.bind(("127.0.0.1", 0))
        result = ping(f"127.0.0.1:{sock.getsockname()[1]}")
    assert result.returncode == 1
    assert "refused" in one_line(result)


def test_ping_asks_the_address_the_broker_wrote_wherever_its_port_came_from(tmp_path: Path) -> None:
    # a health check sees neither serve's flags nor --port 0's choice: only the file
    address_file = tmp_path / "run" / "address"
    address_file.parent.mkdir()
    served = start_serve(tmp_path, "--address-file", str(address_file))
    try:
        assert address_file.read_text() == f"PLAINTEXT 127.0.0.1:{served.port}\n"
        with socket.socket() as sock:  # MINIKAFKA_PORT names a port where nothing listens: the file wins
            sock.bind(("127.0.0.1", 0))
            result = ping(env={"MINIKAFKA_ADDRESS_FILE": str(address_file),
                               "MINIKAFKA_PORT": str(sock.getsockname()[1])})
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith(f"minikafka at 127.0.0.1:{served.port} answers:")
    finally:
        stop_serve(served)
    assert not address_file.exists()  # a stopped broker's address is no answer
    result = ping("--address-file", str(address_file))
    assert result.returncode == 1
    assert f"--address-file {address_file}: no broker address in it yet" in one_line(result)


def test_an_address_file_that_cannot_be_written_is_logged_and_the_broker_serves(tmp_path: Path) -> None:
    address_file = tmp_path / "missing-dir" / "address"
    served = start_serve(tmp_path, "--address-file", str(address_file))
    try:
        assert ping("--port", str(served.port)).returncode == 0
    finally:
        stderr = stop_serve(served)
    assert f"--address-file {address_file}: cannot write it (No such file or directory)" in stderr


@pytest.mark.parametrize("listeners", ["SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0", "SSL://127.0.0.1:0"])
def test_ping_through_the_address_file_prefers_a_plain_listener_and_speaks_tls_to_a_tls_one(
    tmp_path: Path, listeners: str
) -> None:
    from tests.tls_helpers import make_pki

    pki = make_pki(tmp_path / "pki")
    address_file = tmp_path / "address"
    served = start_serve(tmp_path, "--address-file", str(address_file), "--config", f"listeners={listeners}",
                         "--config", f"ssl.keystore.location={pki.keystore}",
                         env={"MINIKAFKA_PORT": ""})  # no --port: the listeners set the ports
    try:
        written = address_file.read_text().splitlines()
        assert [line.split(" ")[0] for line in written] == [name.split(":")[0] for name in listeners.split(",")]
        result = ping("--address-file", str(address_file))
        assert result.returncode == 0, result.stderr
        wanted = written[1] if len(written) > 1 else written[0]  # PLAINTEXT when there is one
        assert result.stdout.startswith(f"minikafka at {wanted.split(' ')[1]} answers:")
    finally:
        stop_serve(served)


def test_serve_keeps_serving_and_stops_cleanly_when_its_output_pipe_closes(tmp_path: Path) -> None:
    # `minikafka serve 2>&1 | head -1`: the reader exits after one line; the broker logs on (DEBUG)
    data_dir = tmp_path / "data"
    read_end, write_end = os.pipe()
    process = subprocess.Popen([str(MINIKAFKA), "serve", "--port", "0", "--data-dir", str(data_dir),
                                "--log-level", "DEBUG"], stdout=write_end, stderr=write_end, env=cli_env())
    os.close(write_end)
    try:
        port = None
        output = b""
        deadline = time.monotonic() + 30
        while port is None and time.monotonic() < deadline:
            if select.select([read_end], [], [], 0.2)[0]:
                output += os.read(read_end, 65536)
            for line in output.decode(errors="replace").splitlines():
                if line.startswith("minikafka listening on "):
                    port = int(line.rsplit(":", 1)[1])
        assert port is not None, output
        os.close(read_end)  # the reader is gone: every later write hits a closed pipe
        read_end = -1
        for _ in range(5):  # each connection logs DEBUG lines nobody can read
            assert ping("--port", str(port)).returncode == 0
        assert process.poll() is None
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if read_end >= 0:
            os.close(read_end)
        if process.poll() is None:
            process.kill()
            process.wait()
    assert (data_dir / ".kafka_cleanshutdown").exists()  # the next start recovers nothing


# ----------------------------------------------------------------------------- helpers
class Served:
    def __init__(self, process: subprocess.Popen[str], port: int) -> None:
        self.process, self.port = process, port


def start_serve(tmp_path: Path, *extra: str, env: dict[str, str] | None = None) -> Served:
    """``minikafka serve --port 0 --data-dir tmp_path/data --log-level WARNING``, less the flags
    whose variable ``env`` sets."""
    env = env or {}
    defaults = {"MINIKAFKA_PORT": ["--port", "0"], "MINIKAFKA_DATA_DIR": ["--data-dir", str(tmp_path / "data")],
                "MINIKAFKA_LOG_LEVEL": ["--log-level", "WARNING"]}
    options = [arg for variable, flag in defaults.items() if variable not in env for arg in flag]
    process = subprocess.Popen([str(MINIKAFKA), "serve", *options, *extra],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(**env))
    assert process.stdout is not None
    line = process.stdout.readline()  # the readiness line, or EOF if serve exits
    if not line.startswith("minikafka listening on "):
        process.kill()
        raise AssertionError(f"serve did not start: {line!r} {process.communicate(timeout=30)}")
    return Served(process, int(line.strip().rsplit(":", 1)[1]))


def stop_serve(served: Served) -> str:
    served.process.send_signal(signal.SIGTERM)
    _out, err = served.process.communicate(timeout=30)
    assert served.process.returncode == 0, err
    return err


def ping(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli("ping", "--timeout", "5", *args, env=env)
