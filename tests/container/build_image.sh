#!/usr/bin/env bash
# Build the minikafka image from the repository's Dockerfile on a machine without Docker Hub.
#
#   tests/container/build_image.sh [--keep-engine]
#
# 1. Engine: Debian's docker.io dockerd (installed with apt if missing), started only if no
#    engine answers; host networking only: no bridge, no iptables rules, ip_forward untouched.
# 2. Offline base image: debootstrap'ed Debian bookworm with python3 + python3-venv, imported
#    as localhost/ci/debian-python:bookworm (the tar is cached in ~/.cache/minikafka-ci).
# 3. Wheels for the base image's Python, made on the host: minikafka's own, and its
#    dependencies from the package index. The image build itself needs no network.
# 4. docker build --build-arg BASE_IMAGE=<base> -t localhost/minikafka:test
#
# Prints IMAGE=<tag> on stdout (progress goes to stderr). A dockerd this script started is
# stopped when it exits, unless --keep-engine: then it prints ENGINE_PID=<pid> and whoever
# called it stops that process when done. Needs root (apt, debootstrap, dockerd).
set -euo pipefail

KEEP_ENGINE=0
[ "${1:-}" = "--keep-engine" ] && KEEP_ENGINE=1
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CACHE=${MINIKAFKA_CI_CACHE:-$HOME/.cache/minikafka-ci}
BASE_TAG=${MINIKAFKA_BASE_IMAGE:-localhost/ci/debian-python:bookworm}
IMAGE=${MINIKAFKA_IMAGE:-localhost/minikafka:test}
PYTHON=${PYTHON:-$( [ -x "$ROOT/.venv/bin/python" ] && echo "$ROOT/.venv/bin/python" || echo python3 )}
WORK=$(mktemp -d /tmp/minikafka-image.XXXXXX)
ENGINE_PID=""

# shellcheck source=tests/container/lib.sh
. "$ROOT/tests/container/lib.sh"

cleanup() {
  set +e
  if [ -n "$ENGINE_PID" ] && [ "$KEEP_ENGINE" = 0 ]; then
    log "stopping the dockerd this script started (pid $ENGINE_PID)"
    kill "$ENGINE_PID" 2>/dev/null
    for _ in $(seq 60); do kill -0 "$ENGINE_PID" 2>/dev/null || break; sleep 0.5; done
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# Debian's CLI matches Debian's engine; a newer CLI elsewhere on PATH may lack the legacy builder.
docker_cli() { if [ -x /usr/bin/docker ]; then /usr/bin/docker "$@"; else docker "$@"; fi; }

start_dockerd() {  # start_dockerd <storage-driver>
  local log_file="$CACHE/dockerd-$1.log"
  # stdout/stderr to a file and stdin from /dev/null: the daemon may outlive this script
  dockerd --iptables=false --ip-forward=false --bridge=none --storage-driver="$1" \
          >"$log_file" 2>&1 </dev/null &
  ENGINE_PID=$!
  for _ in $(seq 120); do
    docker_cli info >/dev/null 2>&1 && return 0
    kill -0 "$ENGINE_PID" 2>/dev/null || break
    sleep 0.25
  done
  log "dockerd ($1) did not come up:"; tail -5 "$log_file" >&2
  kill "$ENGINE_PID" 2>/dev/null; wait "$ENGINE_PID" 2>/dev/null; ENGINE_PID=""
  return 1
}

mkdir -p "$CACHE"

# 1. engine
apt_need dockerd docker.io
if ! docker_cli info >/dev/null 2>&1; then
  log "starting dockerd (no bridge, no iptables)"
  start_dockerd overlay2 || start_dockerd vfs || { log "no container engine could be started"; exit 1; }
fi
log "engine: $(docker_cli info --format '{{.ServerVersion}} {{.Driver}}')"

# 2. offline base image
if ! docker_cli image inspect "$BASE_TAG" >/dev/null 2>&1; then
  if [ ! -s "$CACHE/bookworm-python3.tar" ]; then
    apt_need debootstrap debootstrap
    log "debootstrap bookworm (minbase + python3 + python3-venv); about a minute"
    debootstrap --variant=minbase --include=python3,python3-venv bookworm "$WORK/rootfs" \
        http://deb.debian.org/debian >"$WORK/debootstrap.log" 2>&1 \
      || { tail -20 "$WORK/debootstrap.log" >&2; exit 1; }
    rm -rf "$WORK"/rootfs/var/cache/apt/archives/*.deb "$WORK"/rootfs/var/lib/apt/lists/* \
           "$WORK"/rootfs/usr/share/doc "$WORK"/rootfs/usr/share/man "$WORK"/rootfs/usr/share/locale
    tar -C "$WORK/rootfs" -cf "$CACHE/bookworm-python3.tar.tmp" . \
      && mv "$CACHE/bookworm-python3.tar.tmp" "$CACHE/bookworm-python3.tar"
    rm -rf "$WORK/rootfs"
  fi
  log "importing base image $BASE_TAG"
  docker_cli import --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' \
      "$CACHE/bookworm-python3.tar" "$BASE_TAG" >/dev/null
fi

# 3. wheels for the base image's Python
PY_VERSION=$(docker_cli run --rm --network none "$BASE_TAG" python3 -c \
    'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
ARCH=$(uname -m)
log "building wheels for Python $PY_VERSION ($ARCH) with $PYTHON"
mkdir -p "$WORK/context/dist"
cp "$ROOT/Dockerfile" "$ROOT/.dockerignore" "$WORK/context/"
# from a copy of the sources: building in the work tree would leave build/ and egg-info there
mkdir -p "$WORK/src"
tar -C "$ROOT" --exclude=__pycache__ -cf - pyproject.toml README.md minikafka | tar -C "$WORK/src" -xf -
"$PYTHON" -m pip wheel -q --no-deps -w "$WORK/context/dist" "$WORK/src" >&2
"$PYTHON" -m pip download -q --only-binary=:all: --implementation cp --python-version "$PY_VERSION" \
    --platform "manylinux_2_28_$ARCH" --platform "manylinux_2_17_$ARCH" --platform "manylinux2014_$ARCH" \
    --platform "manylinux_2_5_$ARCH" --platform "manylinux1_$ARCH" \
    -d "$WORK/context/dist" "$WORK"/context/dist/minikafka-*.whl >&2

# 4. the image (the legacy builder: it needs nothing from Docker Hub)
log "building $IMAGE from $BASE_TAG"
DOCKER_BUILDKIT=0 docker_cli build -q --build-arg BASE_IMAGE="$BASE_TAG" -t "$IMAGE" "$WORK/context" >/dev/null
log "built $IMAGE"
echo "IMAGE=$IMAGE"
if [ -n "$ENGINE_PID" ] && [ "$KEEP_ENGINE" = 1 ]; then
  echo "ENGINE_PID=$ENGINE_PID"
fi
