# minikafka as a container: a Kafka-compatible broker for integration tests.
#
# The build needs no network: the wheels of minikafka and of its dependencies are made on the
# host first, for the base image's Python (tests/container/build_image.sh does every step):
#   python3 -m pip wheel --no-deps -w dist .
#   python3 -m pip download --only-binary=:all: --python-version 3.12 -d dist dist/minikafka-*.whl
#   docker build -t minikafka .
# Without Docker Hub, give a local image that has python3 and its venv module:
#   docker build --build-arg BASE_IMAGE=localhost/ci/debian-python:bookworm -t minikafka .
ARG BASE_IMAGE=python:3.12-slim
FROM ${BASE_IMAGE}

COPY dist/*.whl /tmp/wheels/
RUN python3 -m venv /opt/minikafka \
    && /opt/minikafka/bin/pip install --no-cache-dir --no-index --find-links /tmp/wheels /tmp/wheels/minikafka-*.whl \
    && rm -rf /tmp/wheels \
    && groupadd --system --gid 10001 minikafka \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /var/lib/minikafka minikafka \
    && mkdir -p /var/lib/minikafka \
    && chown minikafka:minikafka /var/lib/minikafka

# Listen on every interface inside the container. Clients are told to reconnect to
# MINIKAFKA_ADVERTISED_HOST:MINIKAFKA_ADVERTISED_PORT (default 127.0.0.1 and the listening port):
# set them to the address the clients use, e.g. with `-p 19092:9092` set the port to 19092.
ENV PATH=/opt/minikafka/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    MINIKAFKA_HOST=0.0.0.0 \
    MINIKAFKA_PORT=9092 \
    MINIKAFKA_ADMIN_PORT=9093 \
    MINIKAFKA_DATA_DIR=/var/lib/minikafka

VOLUME ["/var/lib/minikafka"]
EXPOSE 9092 9093
USER 10001:10001
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s --retries=3 CMD ["minikafka", "ping", "--quiet"]
# SIGTERM (docker stop) shuts down cleanly in a fraction of a second; arguments after the
# image name go to `minikafka serve`, e.g. `--config num.partitions=3 --faults /faults.yaml`.
ENTRYPOINT ["minikafka", "serve"]
