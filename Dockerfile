# minikafka as a container: a Kafka-compatible broker for integration tests.
#
# The build needs no network: the wheels of minikafka and of its dependencies are made on the
# host first, for the base image's Python (asked of the base image itself, so the pair always
# matches; docs/integration-testing.md has the same commands):
#   BASE_IMAGE=${BASE_IMAGE:-python:3.12-slim}
#   PY_VERSION=$(docker run --rm "$BASE_IMAGE" python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
#   python3 -m pip wheel --no-deps -w dist .
#   python3 -m pip download --only-binary=:all: --python-version "$PY_VERSION" -d dist dist/minikafka-*.whl
#   docker build --build-arg BASE_IMAGE="$BASE_IMAGE" -t minikafka .
# Without Docker Hub, set BASE_IMAGE to a local image that has python3 and its venv module
# (tests/container/build_image.sh makes one with debootstrap: localhost/ci/debian-python:bookworm).
ARG BASE_IMAGE=python:3.12-slim
FROM ${BASE_IMAGE}

COPY dist/*.whl /tmp/wheels/
RUN python3 -m venv /opt/minikafka \
    && /opt/minikafka/bin/pip install --no-cache-dir --no-index --find-links /tmp/wheels /tmp/wheels/minikafka-*.whl \
    && rm -rf /tmp/wheels \
    && groupadd --system --gid 10001 minikafka \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /var/lib/minikafka minikafka \
    && mkdir -p /var/lib/minikafka /run/minikafka \
    && chown minikafka:minikafka /var/lib/minikafka /run/minikafka

# Listen on every interface inside the container. Clients are told to reconnect to
# MINIKAFKA_ADVERTISED_HOST:MINIKAFKA_ADVERTISED_PORT (default 127.0.0.1 and the listening port):
# set them to the address the clients use, e.g. with `-p 19092:9092` set the port to 19092.
# MINIKAFKA_BROKERS=N runs a cluster of N brokers in the one container on MINIKAFKA_PORT, +1, ...
# (each advertised on the same host, and on the advertised port +0, +1, ...); its admin endpoint
# then needs a port outside theirs, e.g. MINIKAFKA_ADMIN_PORT=9095 for three.
ENV PATH=/opt/minikafka/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    MINIKAFKA_HOST=0.0.0.0 \
    MINIKAFKA_PORT=9092 \
    MINIKAFKA_ADMIN_PORT=9093 \
    MINIKAFKA_DATA_DIR=/var/lib/minikafka \
    MINIKAFKA_ADDRESS_FILE=/run/minikafka/address

VOLUME ["/var/lib/minikafka"]
# Kafka on 9092 (a cluster: 9092-9094 for three brokers), the admin endpoint on 9093 (a cluster's: 9095)
EXPOSE 9092-9095
USER 10001:10001
# Healthy = answering Kafka requests: an ApiVersions round trip to where the broker listens. The
# port may come from a flag after the image name, MINIKAFKA_PORT, `--config listeners=...` or
# `--port 0`, none of which the check's own process can see; so `serve` writes the address of each
# listener it bound to MINIKAFKA_ADDRESS_FILE (in the runtime dir /run/minikafka, not in the data
# volume, and removed on a clean stop) and `ping` reads it from there. A cluster writes every
# broker's address, and the check passes only while each one answers.
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s --retries=3 CMD ["minikafka", "ping", "--quiet"]
# SIGTERM (docker stop) shuts down cleanly in a fraction of a second; arguments after the
# image name go to `minikafka serve`, e.g. `--config num.partitions=3 --faults /faults.yaml`.
ENTRYPOINT ["minikafka", "serve"]
