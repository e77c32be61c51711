"""librdkafka's own integration tests against ``minikafka serve``: pass, fail and skip per test.

librdkafka's ``tests/`` directory holds its test runner (``test-runner``); every test that is not
marked local talks to a real cluster named in ``test.conf``. This script builds that runner from a
librdkafka source tree into a cache directory outside the repository, starts ``minikafka serve``
(one broker, or ``--brokers N``) on loopback, and runs the cluster tests one at a time, each under
a time limit, with a fresh broker only when the last one died. Unlike librdkafka's own integration
job (``make quick``) it runs them in full: quick mode (``-Q``) skips every sub-test not marked
quick, which leaves some tests (0018, 0019) with nothing to run. Like that job it leaves out the
socket-emulation tests (``-E``).

The broker is set up as librdkafka's reference cluster (trivup, ``tests/scenarios/default.json``):
``num.partitions=4``, auto-creation on, ``default.replication.factor`` = min(3, N) (the internal
topics' factors and ``transaction.state.log.min.isr`` are already min(3, N) and min(2, N)).
``--scenario noautocreate`` turns auto-creation off and runs the tests that need that.
``--group-protocol consumer`` sets ``TEST_CONSUMER_GROUP_PROTOCOL``, which switches every consumer
the tests create to the KIP-848 protocol (``group.protocol=consumer``).

The tests' own time limits are multiplied by 3 (``test.timeout.multiplier`` in ``test.conf``,
``--timeout-multiplier``): the multiplier librdkafka's runner gives itself on CI, where its
integration job runs against Kafka (it adds 2 when ``CI`` is set, and 1 more for its 3 tests in
parallel, which this script does not do). Some sub-tests need it with Kafka's defaults: under the
KIP-848 protocol 0113's ``t_max_poll_interval_exceeded`` waits for the broker to expire a member
that stopped heartbeating, which takes ``group.consumer.session.timeout.ms`` (45 s: Kafka's default,
which librdkafka's CI keeps) while the sub-test gives itself 30 s. The ``CI`` variable itself is
not set: on CI the runner skips 0055's latency measurements and runs sub-tests it would skip in
quick mode.

Left out of the list (each with its reason, printed with ``--list``): local and mock tests (they
test librdkafka against itself), SSL/SASL/OIDC tests (they need listeners and credentials of
trivup's), tests that need Kafka's own tools (``kafka-topics.sh``, ``kafka-acls.sh``, the Java
``TransactionProducerCli``), share-consumer tests (KIP-932, Kafka 4.2), the
manual ones and those librdkafka marks as known issues.

The source: a librdkafka checkout or a bare git directory (``--source``, plus ``--ref`` for a
git directory). Building needs a C/C++ toolchain, make, libssl-dev and zlib1g-dev; with
rapidjson-dev the four tests that parse JSON run too.

    .venv/bin/python -m bench.librdkafka_suite --source ~/src/librdkafka [--brokers 1]
        [--group-protocol classic|consumer] [--scenario default|noautocreate]
        [--tests 0001,0012] [--timeout 300] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from bench._serve import serve

DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "minikafka" / "librdkafka"

#: configure options: no GSSAPI, no libcurl (OIDC) and only the bundled compression codecs, so that
#: the build needs nothing beyond libssl-dev and zlib1g-dev.
CONFIGURE_ARGS = ("--disable-gssapi", "--disable-curl", "--disable-zstd", "--disable-lz4-ext")

#: Cluster tests left out, by test number, and why.
EXCLUDED = {
    "0052": "creates its topic with Kafka's kafka-topics.sh (KAFKA_PATH)",
    "0077": "creates its topic with Kafka's kafka-topics.sh (KAFKA_PATH)",
    "0098": "produces with Kafka's Java TransactionProducerCli (KAFKA_PATH)",
    "0109": "denies a topic with Kafka's kafka-acls.sh (KAFKA_PATH)",
    "0097": "SSL certificate verification: needs trivup's SSL listeners",
    "0115": "ACLs set with Kafka's kafka-acls.sh (KAFKA_PATH)",
    "0119": "ACLs set with Kafka's kafka-acls.sh (KAFKA_PATH)",
    "0126": "SASL/OAUTHBEARER with an OIDC server",
    "0135": "SASL credentials",
    "0142": "SASL re-authentication",
}

@dataclass
class TestDef:
    """One entry of test.c's test table."""

    name: str
    number: str
    flags: str
    scenario: str  # "" = default only


@dataclass
class Result:
    """The outcome of one table entry in one run."""

    name: str
    state: str  # PASSED, FAILED, SKIPPED, TIMEOUT, BROKER-DIED
    seconds: float
    reason: str


#: Seconds allowed to tests that take longer than ``--timeout`` in full mode on a healthy broker:
#: 0113 runs some 40 cooperative-rebalance sub-tests of 5-20 s each.
LONG_TESTS = {"0113": 900}

#: Table entries left out by name: they change topics with Kafka's kafka-topics.sh (KAFKA_PATH),
#: which this machine does not have, and fail (rather than skip) without it.
EXCLUDED_NAMES = {
    "0045_subscribe_update_topic_remove": "deletes topics with Kafka's kafka-topics.sh (KAFKA_PATH)",
    "0045_subscribe_update_non_exist_and_partchange": "adds partitions with Kafka's kafka-topics.sh (KAFKA_PATH)",
}


def parse_test_table(test_c: str) -> list[TestDef]:
    """The entries of ``struct test tests[]`` in tests/test.c: name, flags and scenario."""
    start = test_c.index("struct test tests[] = {")
    body = re.sub(r"/\*.*?\*/", "", test_c[start:test_c.index("\n};", start)], flags=re.S)
    found = []
    for match in re.finditer(r"_TEST\((\w+),", body):
        depth, end = 1, match.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(body[end], 0)
            end += 1
        args = " ".join(body[match.end():end - 1].split())
        scenario = re.search(r'\.scenario\s*=\s*"([^"]*)"', args)
        found.append(TestDef(match.group(1), match.group(1)[:4], args, scenario.group(1) if scenario else ""))
    return found


def exclusion(test: TestDef) -> str | None:
    """Why ``test`` is not run against minikafka, or None when it is."""
    if "TEST_F_LOCAL" in test.flags:
        return "local: no broker"
    if "TEST_F_MANUAL" in test.flags:
        return "manual"
    if "TEST_F_KNOWN_ISSUE," in test.flags + "," or test.flags.startswith("TEST_F_KNOWN_ISSUE "):
        return "known issue in librdkafka"
    if "TEST_F_SOCKEM" in test.flags:
        return "socket emulation: left out of librdkafka's own integration run (make quick, -E)"
    if "mock" in test.name:
        return "librdkafka's mock cluster"
    if "share_consumer" in test.name:
        return "share groups (KIP-932, Kafka 4.2)"
    return EXCLUDED_NAMES.get(test.name) or EXCLUDED.get(test.number)


def selected(tests: list[TestDef], scenario: str, only: set[str] | None) -> list[TestDef]:
    """The tests to run in ``scenario``, in table order."""
    chosen = []
    for test in tests:
        if exclusion(test) is not None or (only is not None and test.number not in only):
            continue
        scenarios = test.scenario.split(",") if test.scenario else ["default"]
        if scenario in scenarios:
            chosen.append(test)
    return chosen


# --- source and build -----------------------------------------------------------------------------

def run_logged(cmd: list[str], cwd: Path, log: Path, env: dict[str, str] | None = None) -> None:
    """Run a build step at low priority, its output appended to ``log``; exit with one line on failure."""
    with log.open("a") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        code = subprocess.call(["nice", "-n", "10", *cmd], cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                               env=dict(os.environ, **(env or {})))
    if code != 0:
        sys.exit(f"librdkafka_suite: {' '.join(cmd)} failed in {cwd} (exit {code}); see {log}")


def source_tree(source: Path, ref: str, cache: Path) -> Path:
    """A librdkafka source tree in ``cache``: unpacked from a git directory at ``ref``, or a copy."""
    is_git = (source / "HEAD").is_file() and (source / "objects").is_dir()
    if is_git:
        commit = subprocess.check_output(["git", "--git-dir", str(source), "rev-parse", "--short", ref],
                                         text=True).strip()
        tree = cache / f"librdkafka-{commit}"
    elif source.resolve().parent == cache.resolve():
        return source  # a tree unpacked here before
    else:
        tree = cache / source.resolve().name
    if (tree / "configure").is_file():
        return tree
    cache.mkdir(parents=True, exist_ok=True)
    if is_git:
        archive = subprocess.Popen(["git", "--git-dir", str(source), "archive", f"--prefix={tree.name}/", ref],
                                   stdout=subprocess.PIPE)
        subprocess.check_call(["tar", "x", "-C", str(cache)], stdin=archive.stdout)
        if archive.wait() != 0:
            sys.exit(f"librdkafka_suite: git archive {ref} failed in {source}")
    else:
        shutil.copytree(source, tree, ignore=shutil.ignore_patterns(".git", "*.o", "*.so*", "*.a"))
    return tree


def build(tree: Path, jobs: int) -> Path:
    """Build librdkafka and its test runner (once); the path of ``tests/test-runner``."""
    runner = tree / "tests" / "test-runner"
    if runner.is_file():
        return runner
    log = tree / "minikafka-build.log"
    print(f"building librdkafka in {tree} (log: {log})", flush=True)
    if not (tree / "Makefile.config").is_file():
        run_logged(["./configure", *CONFIGURE_ARGS], tree, log)
    run_logged(["make", f"-j{jobs}", "libs"], tree, log)
    run_logged(["make", f"-j{jobs}", "test-runner"], tree / "tests", log, rapidjson_flags())
    return runner


def rapidjson_flags() -> dict[str, str]:
    """The compiler flag that turns on the tests that parse JSON (0053, 0098, 0101, 0110) when
    RapidJSON's headers are installed (Debian: rapidjson-dev); without it they skip themselves."""
    found = any(Path(include, "rapidjson", "document.h").is_file() for include in ("/usr/include", "/usr/local/include"))
    return {"CXXFLAGS": "-DWITH_RAPIDJSON=1"} if found else {}


# --- running --------------------------------------------------------------------------------------

ANSI = re.compile(r"\x1b\[[0-9;]*m|\x1b\(B")
SUMMARY_LINE = re.compile(r"^\|\s*(\w+)\s*\|\s*(PASSED|FAILED|SKIPPED|RUNNING|DNS)\s*\|\s*([\d.]+)s\s*\|\s*(.*)$")


def summary_results(output: str, wanted: list[TestDef]) -> dict[str, Result]:
    """The test runner's summary table, for the entries in ``wanted``."""
    names = {test.name for test in wanted}
    found = {}
    for raw in output.splitlines():
        match = SUMMARY_LINE.match(ANSI.sub("", raw).strip())
        if match and match.group(1) in names:
            name, state, seconds, reason = match.groups()
            found[name] = Result(name, state, float(seconds), reason.strip())
    return found


def failure_reason(output: str, name: str = "") -> str:
    """What the first failure (of table entry ``name``, when given) in a test's output says:
    librdkafka prints ``### Test "<name> (<sub-test>)" failed at <where> ###`` and then the message."""
    lines = [ANSI.sub("", raw).strip() for raw in output.splitlines()]
    for index, line in enumerate(lines):
        if line.startswith("### Test") and "failed at" in line and re.match(rf'### Test "{name}[ "]', line):
            where = line.split("failed at", 1)[1].split(" at ", 1)[0].strip()
            message = lines[index + 1] if index + 1 < len(lines) else ""
            return f"{where}: {message}"[:300]
    return ""


def entry_result(output: str, test: TestDef, seconds: float) -> Result | None:
    """The outcome of one entry read from its own lines, for a run that printed no summary (librdkafka
    skips it when threads outlive the tests): None when the entry neither passed nor failed."""
    reason = failure_reason(output, test.name)
    if reason:
        return Result(test.name, "FAILED", seconds, reason)
    if f"Test {test.name} PASSED" in ANSI.sub("", output):
        return Result(test.name, "PASSED", seconds, "")
    return None


def run_number(runner: Path, number: str, env: dict[str, str], timeout: float, log: Path) -> tuple[str, bool]:
    """Run one test number (all its table entries) alone; (its output, whether it timed out)."""
    proc = subprocess.Popen([str(runner), "-L", "-E", "-p1"], cwd=runner.parent,
                            env=dict(env, TESTS=number), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, errors="replace", start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        timed_out = True
    finally:  # also when this script is stopped: no runner left behind
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    with log.open("a") as out:
        out.write(f"===== {number} (timed out: {timed_out}, exit {proc.returncode})\n{output}\n")
    return output, timed_out


@contextmanager
def broker(brokers: int, scenario: str, log: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``minikafka serve`` set up as librdkafka's reference cluster; yields (bootstrap, process)."""
    settings = ["num.partitions=4", f"default.replication.factor={min(3, brokers)}"]
    if scenario == "noautocreate":
        settings.append("auto.create.topics.enable=false")
    args = ["--brokers", str(brokers)]
    for setting in settings:
        args += ["--config", setting]
    with log.open("a") as out, serve(*args, log=out) as (bootstrap, proc, _):
        yield bootstrap, proc


def run_suite(runner: Path, tests: list[TestDef], args: argparse.Namespace, work: Path) -> list[Result]:
    """Run ``tests`` one number at a time against one broker, started anew only after one died."""
    numbers = list(dict.fromkeys(test.number for test in tests))
    results: list[Result] = []
    env = dict(os.environ, TEST_KAFKA_VERSION=args.kafka_version, TEST_SCENARIO=args.scenario,
               RDKAFKA_TEST_CONF=str(work / "test.conf"),
               LD_LIBRARY_PATH=f"{runner.parent.parent / 'src'}:{runner.parent.parent / 'src-cpp'}")
    env.pop("CI", None)  # librdkafka's runner runs slow sub-tests it would skip in quick mode on CI
    if args.group_protocol == "consumer":
        env["TEST_CONSUMER_GROUP_PROTOCOL"] = "consumer"
    if args.subtests:
        env["SUBTESTS"] = args.subtests
    test_log, broker_log = work / "tests.log", work / "broker.log"
    pending = list(numbers)
    while pending:  # one pass per broker life; bounded by the number of tests
        with broker(args.brokers, args.scenario, broker_log) as (bootstrap, proc):
            (work / "test.conf").write_text(f"bootstrap.servers={bootstrap}\n"
                                            f"test.timeout.multiplier={args.timeout_multiplier:g}\n")
            while pending:
                number = pending.pop(0)
                entries = [test for test in tests if test.number == number]
                started = time.monotonic()
                limit = max(args.timeout, LONG_TESTS.get(number, 0))
                output, timed_out = run_number(runner, number, env, limit, test_log)
                elapsed = time.monotonic() - started
                found = summary_results(output, entries)
                died = proc.poll() is not None
                for test in entries:
                    if test.name in found and not timed_out:
                        result = found[test.name]
                        if result.state == "FAILED":
                            result.reason = failure_reason(output, test.name) or result.reason
                    elif (read := entry_result(output, test, elapsed)) is not None:
                        result = read
                    else:
                        state = "BROKER-DIED" if died else "TIMEOUT" if timed_out else "FAILED"
                        result = Result(test.name, state, elapsed, failure_reason(output) or
                                        (f"stopped after {limit:.0f} s" if timed_out else "no result from the runner"))
                    results.append(result)
                    print(f"{result.name:<50} {result.state:<11} {result.seconds:8.1f}s  {result.reason[:160]}",
                          flush=True)
                if died:
                    print(f"the broker exited (code {proc.returncode}); see {broker_log}; starting another",
                          flush=True)
                    break
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, required=True,
                        help="a librdkafka source tree, or a git directory (with --ref)")
    parser.add_argument("--ref", default="HEAD", help="commit to build when --source is a git directory")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help=f"build directory [{DEFAULT_CACHE}]")
    parser.add_argument("--jobs", type=int, default=2, help="parallel compile jobs")
    parser.add_argument("--brokers", type=int, default=1)
    parser.add_argument("--group-protocol", choices=("classic", "consumer"), default="classic")
    parser.add_argument("--scenario", choices=("default", "noautocreate"), default="default")
    parser.add_argument("--kafka-version", default="4.0.0", help="TEST_KAFKA_VERSION: the version tests assume")
    parser.add_argument("--tests", help="comma-separated test numbers (default: every cluster test)")
    parser.add_argument("--subtests", help="SUBTESTS: run only the sub-tests whose name contains this")
    parser.add_argument("--timeout", type=float, default=300,
                        help="seconds allowed per test number (0113: at least 900)")
    parser.add_argument("--timeout-multiplier", type=float, default=3.0,
                        help="test.timeout.multiplier: scales the tests' own time limits (3: as on librdkafka's CI)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--list", action="store_true", help="print the selection and the exclusions, then exit")
    args = parser.parse_args()
    if args.brokers < 1 or args.timeout <= 0:
        parser.error("--brokers and --timeout must be positive")
    if not args.source.is_dir():
        parser.error(f"--source {args.source}: not a directory")

    tree = source_tree(args.source, args.ref, args.cache)
    table = parse_test_table((tree / "tests" / "test.c").read_text())
    only = set(args.tests.split(",")) if args.tests else None
    tests = selected(table, args.scenario, only)
    if args.list:
        for test in table:
            why = exclusion(test)
            print(f"{test.name:<50} {'run' if test in tests else why or 'other scenario'}")
        return
    runner = build(tree, args.jobs)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("librdkafka_suite: stopped"))  # stop the broker too
    work = Path(tempfile.mkdtemp(prefix="librdkafka-suite-"))
    print(f"{len(tests)} table entries; brokers={args.brokers} group.protocol={args.group_protocol} "
          f"scenario={args.scenario} TEST_KAFKA_VERSION={args.kafka_version}; logs in {work}", flush=True)
    results = run_suite(runner, tests, args, work)
    totals = Counter(result.state for result in results)
    print("totals: " + ", ".join(f"{state} {count}" for state, count in sorted(totals.items())))
    if args.json:
        args.json.write_text(json.dumps([asdict(result) for result in results], indent=1))


if __name__ == "__main__":
    main()
