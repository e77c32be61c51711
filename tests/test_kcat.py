"""Debian's kcat (librdkafka 2.0, which fails on tagged fields it does not expect) lists, produces and consumes."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from minikafka.broker.embedded import BrokerThread


@pytest.fixture(scope="session")
def kcat() -> str:
    """kcat on PATH, installed from Debian's packages when missing (CI runs as root)."""
    path = shutil.which("kcat")
    if path is None:
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, timeout=300)
        subprocess.run(["apt-get", "install", "-y", "-qq", "kcat"], check=True, env=env, timeout=300,
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
