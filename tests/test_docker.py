"""The Docker image: built from the repository's Dockerfile, run as a container, used by real clients.

The machines this runs on have no Docker Hub, so ``tests/container/build_image.sh`` installs
Debian's engine if it is missing, starts it if none runs (no bridge: containers use the host
network and listen on 127.0.0.1), builds an offline Debian base image and passes it to the
Dockerfile as ``BASE_IMAGE``. If the engine cannot be had, these tests fail with the reason;
they are never skipped.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.client_helpers import CLIENTS, check_consumed, make_records

ROOT = Path(__file__).resolve().parent.parent
BUILD_SCRIPT = ROOT / "tests" / "container" / "build_image.sh"
LOCK_FILE = Path("/tmp/minikafka-docker-tests.lock")
DOCKER = "/usr/bin/docker" if Path("/usr/bin/docker").exists() else "docker"


def docker(*args: str, timeout: float = 120, check: bool = True) -> str:
    result = subprocess.run([DOCKER, *args], capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")
    return result.stdout.strip()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _stop_engine(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.2)


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    """The image tag; the engine runs while the module's tests do (stopped after if we started it)."""
    if os.geteuid() != 0:
        pytest.fail("the Docker tests need root (apt-get, debootstrap, dockerd); run the suite as root")
    LOCK_FILE.touch(exist_ok=True)
    with open(LOCK_FILE) as lock:  # another test session on this machine may be using the engine
        deadline = time.monotonic() + 600
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail(f"{LOCK_FILE} stayed locked for 10 minutes by another test session")
                time.sleep(1)
        result = subprocess.run(["bash", str(BUILD_SCRIPT), "--keep-engine"], capture_output=True, text=True,
                                timeout=900)
        values = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
        engine_pid = int(values["ENGINE_PID"]) if "ENGINE_PID" in values else None
        try:
            if result.returncode != 0 or "IMAGE" not in values:
                pytest.fail("could not get a container engine and build the image "
                            f"(build_image.sh exit {result.returncode}):\n{result.stderr[-4000:]}")
            yield values["IMAGE"]
        finally:
            if engine_pid is not None:
                _stop_engine(engine_pid)


@pytest.fixture
def run_container(image: str) -> Iterator[Callable[..., dict[str, Any]]]:
    """Run the image on the host network at 127.0.0.1 with free ports; removed at the end."""
    names: list[str] = []

    def run(*args: str, env: dict[str, str] | None = None, volume: str | None = None,
            image_tag: str | None = None) -> dict[str, Any]:
        port, admin_port = free_port(), free_port()
        name = f"minikafka-test-{os.getpid()}-{len(names)}-{port}"
        env_args = [f"--env={k}={v}" for k, v in {"MINIKAFKA_HOST": "127.0.0.1", "MINIKAFKA_PORT": str(port),
                                                   "MINIKAFKA_ADMIN_PORT": str(admin_port), **(env or {})}.items()]
        volume_args = [f"--volume={volume}"] if volume else []
        docker("run", "--detach", f"--name={name}", "--network=host", "--health-interval=1s", *env_args,
               *volume_args, image_tag or image, *args)
        names.append(name)
        return {"name": name, "bootstrap": f"127.0.0.1:{port}", "admin": f"http://127.0.0.1:{admin_port}"}

    yield run
    for name in names:
        docker("rm", "--force", name, check=False)


def wait_healthy(name: str, timeout: float = 30) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        status = docker("inspect", "--format", "{{.State.Health.Status}}", name)
        if status == "healthy":
            return time.monotonic() - started
        if docker("inspect", "--format", "{{.State.Running}}", name) != "true":
            raise AssertionError(f"container exited: {docker('logs', name, check=False)}")
        time.sleep(0.2)
    raise AssertionError(f"container not healthy within {timeout} s: {docker('logs', name, check=False)}")


def admin(container: dict[str, Any], method: str, path: str, body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(container["admin"] + path, data=data, method=method)
    with urllib.request.urlopen(request, timeout=10) as response:
        text = response.read().decode()
    return json.loads(text) if text.startswith(("{", "[")) else text


def test_dockerfile_passes_hadolint() -> None:
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    result = subprocess.run([hadolint, str(ROOT / "Dockerfile")], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_image_serves_real_clients_keeps_data_in_its_volume_and_stops_fast(
    image: str, run_container: Callable[..., dict[str, Any]]
) -> None:
    config = json.loads(docker("image", "inspect", image))[0]["Config"]
    assert config["User"] == "10001:10001"
    assert "/var/lib/minikafka" in config["Volumes"]
    assert config["Entrypoint"] == ["minikafka", "serve"]

    container = run_container("--config", "num.partitions=3")
    wait_healthy(container["name"])
    records = make_records(500)
    bootstrap = container["bootstrap"]
    CLIENTS["confluent-kafka"][0](bootstrap, "orders", records, **{"enable.idempotence": True})
    check_consumed(records, CLIENTS["kafka-python"][1](bootstrap, "orders", 3, len(records), timeout=30))
    metrics = admin(container, "GET", "/metrics")
    assert f"minikafka_records_appended_total {len(records)}" in metrics

    started = time.monotonic()
    docker("stop", "--time=10", container["name"])
    stop_seconds = time.monotonic() - started
    assert stop_seconds < 1.0, f"docker stop took {stop_seconds:.2f} s"
    assert docker("inspect", "--format", "{{.State.ExitCode}}", container["name"]) == "0"
    assert "stopped (clean)" in subprocess.run([DOCKER, "logs", container["name"]], capture_output=True,
                                               text=True, timeout=30).stderr

    docker("start", container["name"])  # same container, same volume
    wait_healthy(container["name"])
    check_consumed(records, CLIENTS["aiokafka"][1](bootstrap, "orders", 3, len(records), timeout=30))


def test_container_faults_are_driven_over_http(image: str, run_container: Callable[..., dict[str, Any]]) -> None:
    container = run_container()
    wait_healthy(container["name"])
    admin(container, "POST", "/topics", {"name": "payments"})
    rule = admin(container, "POST", "/faults", {"action": "drop_response", "api": "Produce", "topic": "payments",
                                                "trigger": "nth", "n": 2})["rules"][0]
    records = make_records(300)
    CLIENTS["confluent-kafka"][0](container["bootstrap"], "payments", records,
                                  **{"enable.idempotence": True, "batch.num.messages": 50, "retry.backoff.ms": 20})
    assert admin(container, "GET", f"/faults/{rule['id']}")["fired"] == 1
    state = admin(container, "GET", "/topics/payments/0")
    assert state["log_end_offset"] == len(records) and state["counters"]["duplicates"] >= 1
    check_consumed(records, CLIENTS["confluent-kafka"][1](container["bootstrap"], "payments", 1, len(records)))


@pytest.mark.parametrize("how", ["--port", "--port 0", "listeners"])
def test_the_health_check_asks_the_port_the_broker_listens_on(
    image: str, run_container: Callable[..., dict[str, Any]], how: str
) -> None:
    # run_container sets MINIKAFKA_PORT to a free port; the arguments move the broker elsewhere
    port = free_port()
    args = {"--port": ["--port", str(port)], "--port 0": ["--port", "0"],
            "listeners": ["--config", f"listeners=PLAINTEXT://127.0.0.1:{port}"]}[how]
    container = run_container(*args)
    wait_healthy(container["name"])
    listening = [line for line in docker("logs", container["name"]).splitlines()
                 if line.startswith("minikafka listening on ")]
    assert len(listening) == 1, docker("logs", container["name"])
    actual = int(listening[0].rsplit(":", 1)[1])
    if how != "--port 0":
        assert actual == port
    assert docker("exec", container["name"], "cat", "/run/minikafka/address") == f"PLAINTEXT 127.0.0.1:{actual}"
    assert run_minikafka("ping", "--timeout", "5", f"127.0.0.1:{actual}").returncode == 0
    # what the check asked before: MINIKAFKA_PORT, where nothing listens
    assert run_minikafka("ping", "--timeout", "5", container["bootstrap"]).returncode == 1

    docker("stop", "--time=10", container["name"])  # a clean stop takes the address away
    assert docker("inspect", "--format", "{{.State.ExitCode}}", container["name"]) == "0"
    copied = subprocess.run([DOCKER, "cp", f"{container['name']}:/run/minikafka/address", "-"], capture_output=True,
                            text=True, timeout=60)
    assert copied.returncode != 0 and "No such" in copied.stderr, copied


def run_minikafka(*args: str) -> subprocess.CompletedProcess[str]:
    """The minikafka command of this checkout, on the host."""
    return subprocess.run([sys.executable, "-m", "minikafka", *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.mark.parametrize("mount", ["owned by root", "read-only"])
def test_a_data_dir_the_image_cannot_write_is_refused_naming_its_uid(
    image: str, tmp_path: Path, mount: str
) -> None:
    data = tmp_path / "data"  # made by root, as `docker run -v` makes a missing host directory
    data.mkdir()
    data.chmod(0o755 if mount == "owned by root" else 0o777)  # read-only: only the mount is in the way
    suffix = ":ro" if mount == "read-only" else ""
    result = subprocess.run([DOCKER, "run", "--rm", "--network=host", "--env=MINIKAFKA_ADMIN_PORT=",
                             f"--volume={data}:/var/lib/minikafka{suffix}", image, "--port", "0"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 4, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("minikafka: --data-dir /var/lib/minikafka: /var/lib/minikafka "), line
    if mount == "owned by root":
        assert "(owner uid 0, gid 0, mode 755) is not writable by uid 10001 (gid 10001)" in line, line
        assert "chown 10001:10001" in line, line
    else:
        assert "read-only file system" in line, line
    assert list(data.iterdir()) == []


def test_testcontainers_starts_minikafka_from_a_users_test(image: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # the docs' example (docs/integration-testing.md), with this build's image
    monkeypatch.setenv("TESTCONTAINERS_RYUK_DISABLED", "true")  # the reaper image lives on Docker Hub
    from confluent_kafka import Consumer, Producer
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.wait_strategies import LogMessageWaitStrategy

    port = free_port()
    container = (
        DockerContainer(image)
        .with_env("MINIKAFKA_HOST", "127.0.0.1")
        .with_env("MINIKAFKA_PORT", str(port))
        .with_kwargs(network_mode="host")
        .waiting_for(LogMessageWaitStrategy("minikafka listening on").with_startup_timeout(30))
    )
    with container:
        bootstrap = f"127.0.0.1:{port}"
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        producer.produce("greetings", key=b"k", value=b"hello from testcontainers")
        assert producer.flush(10) == 0
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "tc", "auto.offset.reset": "earliest"})
        consumer.subscribe(["greetings"])
        try:
            msg = None
            deadline = time.monotonic() + 30
            while msg is None and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
            assert msg is not None and msg.error() is None
            assert msg.value() == b"hello from testcontainers"
        finally:
            consumer.close()


DOC = ROOT / "docs" / "integration-testing.md"
BASE_IMAGE = os.environ.get("MINIKAFKA_BASE_IMAGE", "localhost/ci/debian-python:bookworm")  # build_image.sh's


def repository_copy(destination: Path) -> Path:
    """The files git tracks (and the ones this change adds), as a fresh clone would have them."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True, timeout=60).stdout.split()
    for name in listed:
        source = ROOT / name
        if source.is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)
    return destination


def test_the_documented_build_commands_work_as_written_and_the_image_reads_yaml_faults(
    image: str, tmp_path: Path, run_container: Callable[..., dict[str, Any]]
) -> None:
    # the docs' build lines, literally, in a copy of the repository; the offline base image (Debian
    # bookworm's Python 3.11) takes the place of python:3.12-slim, and the lines find its version
    from tests.doc_blocks import the_block

    build = the_block(DOC, "docker", "docker build")
    source = repository_copy(tmp_path / "repo")
    env = {**os.environ, "BASE_IMAGE": BASE_IMAGE, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "DOCKER_BUILDKIT": "0"}  # the legacy builder: BuildKit fetches its front end from Docker Hub
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", build.text], cwd=source, env=env,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, f"{build.name}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    assert docker("run", "--rm", "--network=none", "--entrypoint=minikafka", "minikafka", "--version") == \
        f"minikafka {__import__('minikafka').__version__}"

    # the documented `--faults /rules/faults.yaml` with the docs' YAML rule file, mounted read-only
    # (on the host network: these machines have no bridge)
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "faults.yaml").write_text(the_block(DOC, "data", "refuse-twice").text)
    rules.chmod(0o755)
    (rules / "faults.yaml").chmod(0o644)
    container = run_container("--config", "num.partitions=3", "--faults", "/rules/faults.yaml",
                              volume=f"{rules}:/rules:ro", image_tag="minikafka")
    wait_healthy(container["name"])
    listed = admin(container, "GET", "/faults")["rules"]
    assert [(r["id"], r["action"]) for r in listed] == [("refuse-twice", "error_before")]


def test_the_documented_testcontainers_example_runs_two_brokers_side_by_side(image: str, tmp_path: Path) -> None:
    from tests.doc_blocks import the_block

    docker("tag", image, "minikafka")  # the example names the image as the docs' build tags it
    example = the_block(DOC, "docker", 'network_mode="host"')
    (tmp_path / "test_example.py").write_text(example.text)
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             str(tmp_path / "test_example.py")], cwd=tmp_path, capture_output=True, text=True,
                            timeout=300, env={**os.environ, "TESTCONTAINERS_RYUK_DISABLED": "true"})
    assert result.returncode == 0, f"{example.name}:\n{result.stdout[-4000:]}"
    assert "1 passed" in result.stdout



def test_the_documented_published_ports_example_runs(image: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # the docs' example for a bridge network; these machines have no bridge (host network only), so
    # its containers go on the host network, where a port published on its own number is the port the
    # broker listens on: the rest of the example, its test included, runs as written
    monkeypatch.setenv("TESTCONTAINERS_RYUK_DISABLED", "true")  # the reaper image lives on Docker Hub
    from testcontainers.core.container import DockerContainer

    from tests.doc_blocks import the_block

    class OnTheHostNetwork(DockerContainer):
        def _configure(self) -> None:
            published = {int(inside): outside for inside, outside in self.ports.items()}
            assert published and all(inside == outside for inside, outside in published.items()), published
            self.ports = {}  # Docker refuses published ports on the host network
            self._kwargs["network_mode"] = "host"

    docker("tag", image, "minikafka")  # the example names the image as the docs' build tags it
    example = the_block(DOC, "docker", "with_bind_ports")
    namespace: dict[str, Any] = {"__name__": "published_ports_example"}
    exec(compile(example.text, str(example.name), "exec"), namespace)
    namespace["DockerContainer"] = OnTheHostNetwork
    tests = [value for name, value in namespace.items() if name.startswith("test_") and callable(value)]
    assert len(tests) == 1, list(namespace)
    tests[0]()


def consecutive_free_ports(count: int) -> int:
    """The first of ``count`` consecutive ports nothing listens on now (a cluster takes --port, +1, ...)."""
    while True:
        base = free_port()
        if base + count <= 65535 and all(port_is_free(port) for port in range(base + 1, base + count)):
            return base


def port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def test_a_cluster_in_one_container_serves_rf3_on_its_ports_and_is_healthy_only_with_every_broker(
    image: str, run_container: Callable[..., dict[str, Any]]
) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    base, admin_port = consecutive_free_ports(3), free_port()
    container = run_container(env={"MINIKAFKA_BROKERS": "3", "MINIKAFKA_PORT": str(base),
                                   "MINIKAFKA_ADMIN_PORT": str(admin_port), "MINIKAFKA_ADVERTISED_HOST": "localhost"})
    container["admin"] = f"http://127.0.0.1:{admin_port}"
    wait_healthy(container["name"])
    ports = [base, base + 1, base + 2]
    assert docker("exec", container["name"], "cat", "/run/minikafka/address").splitlines() == \
        [f"PLAINTEXT 127.0.0.1:{port} broker={node}" for node, port in enumerate(ports, 1)]
    bootstrap = ",".join(f"127.0.0.1:{port}" for port in ports)

    # every broker advertised on the settable host, each on its own port
    client = AdminClient({"bootstrap.servers": bootstrap})
    brokers = client.list_topics(timeout=30).brokers
    assert sorted((b.id, b.host, b.port) for b in brokers.values()) == \
        [(node, "localhost", port) for node, port in enumerate(ports, 1)]
    client.create_topics([NewTopic("replicated", num_partitions=3, replication_factor=3,
                                   config={"min.insync.replicas": "2"})])["replicated"].result(30)
    records = make_records(300)
    CLIENTS["confluent-kafka"][0](bootstrap, "replicated", records, acks="all", **{"enable.idempotence": True})
    check_consumed(records, CLIENTS["kafka-python"][1](f"localhost:{ports[2]}", "replicated", 3, len(records),
                                                       timeout=30))
    cluster = admin(container, "GET", "/cluster")
    for part in cluster["partitions"]:
        assert sorted(part["replicas"]) == [1, 2, 3] and len(part["isr"]) >= 2, part
    assert sum(p["high_watermark"] for p in cluster["partitions"]) == len(records)

    # the image's own health check asks every broker: down while one is, up when it is back
    config = json.loads(docker("image", "inspect", image))[0]["Config"]
    assert {f"{port}/tcp" for port in range(9092, 9096)} <= set(config["ExposedPorts"])
    check = config["Healthcheck"]["Test"]
    assert check[0] == "CMD"

    def health() -> subprocess.CompletedProcess[str]:
        return subprocess.run([DOCKER, "exec", container["name"], *check[1:]], capture_output=True, text=True,
                              timeout=60)

    assert health().returncode == 0
    admin(container, "POST", "/brokers/2/crash")
    result = health()
    assert result.returncode == 1 and f"127.0.0.1:{ports[1]}" in result.stderr, result
    admin(container, "POST", "/brokers/2/start")
    assert health().returncode == 0
    docker("stop", "--time=10", container["name"])
    assert docker("inspect", "--format", "{{.State.ExitCode}}", container["name"]) == "0"
