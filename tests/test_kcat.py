"""Debian's kcat (librdkafka 2.0, which fails on tagged fields it does not expect) lists, produces and consumes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from minikafka.broker.embedded import BrokerThread

APT_LIB = Path(__file__).resolve().parent / "container" / "lib.sh"


@pytest.fixture(scope="session")
def kcat() -> str:
    """kcat on PATH, installed from Debian's packages when missing (CI runs as root)."""
    path = shutil.which("kcat")
    if path is None:  # the scripts' apt_need: it waits for a dpkg or apt lock another process holds
        subprocess.run(["bash", "-c", '. "$0" && apt_need kcat kcat', str(APT_LIB)], check=True, timeout=1500,
                       stdout=subprocess.DEVNULL)
        path = shutil.which("kcat")
    assert path, "kcat could not be installed"
    return path


def test_kcat_lists_produces_and_consumes(broker: BrokerThread, kcat: str) -> None:
    lines = [f"k{i}:value {i}" for i in range(200)]
    produced = subprocess.run([kcat, "-b", broker.bootstrap, "-P", "-t", "kc", "-K:", "-z", "lz4"],
                              input="\n".join(lines) + "\n", text=True, capture_output=True, timeout=60)
    assert produced.returncode == 0, produced.stderr
    listing = subprocess.run([kcat, "-b", broker.bootstrap, "-L", "-t", "kc"], capture_output=True, text=True,
                             timeout=60)
    assert listing.returncode == 0, listing.stderr
    assert 'topic "kc" with 1 partitions' in listing.stdout
    consumed = subprocess.run([kcat, "-b", broker.bootstrap, "-C", "-t", "kc", "-o", "beginning", "-e", "-K:",
                               "-f", "%k:%s\n"], capture_output=True, text=True, timeout=60)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == lines


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_kcat_compression_reaches_the_log(broker: BrokerThread, kcat: str, codec: str) -> None:
    """librdkafka 2.0 compresses only when Produce v2 and Fetch v2 are advertised: each stored
    batch carries the codec asked for on the command line."""
    from pathlib import Path

    from minikafka.storage.batch import split_batches

    topic = f"kz-{codec}"
    lines = [f"k{i}:{'value ' * 20}{i}" for i in range(300)]
    produced = subprocess.run([kcat, "-b", broker.bootstrap, "-P", "-t", topic, "-K:", "-z", codec],
                              input="\n".join(lines) + "\n", text=True, capture_output=True, timeout=60)
    assert produced.returncode == 0, produced.stderr
    assert "not compressing" not in produced.stderr
    data = b"".join(p.read_bytes() for p in sorted(Path(broker.broker_config.data_dir, f"{topic}-0").glob("*.log")))
    batches = split_batches(data)
    assert batches
    codecs = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
    assert {h.compression for _pos, h in batches} == {codecs[codec]}
    consumed = subprocess.run([kcat, "-b", broker.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-K:",
                               "-f", "%k:%s\n"], capture_output=True, text=True, timeout=60)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == lines
