# omed, OME's controller manager for the OMENative mode.
#
#   docker build -t ome/ome-manager:v1.3.0 .
#
# The base image names no registry host: the builder's own registry configuration (or a
# mirror) decides where python:3.11-slim comes from.
#
# The image holds the product only: the dev cluster and the demo (devcluster/) are a
# distribution of their own, neither copied nor installed here (tests/unit/test_dockerfile.py).
#
# The image runs as uid 65532 on a read-only root filesystem: nothing is written outside
# /tmp, which the ome-resources chart mounts as an emptyDir (docs/deploy.md).

FROM python:3.11-slim AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY omed ./omed
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
COPY --from=build /wheels /wheels
# The wheel brings its dependencies, uvloop among them; the import checks that the event
# loop omed runs on installed. pip compiles the .pyc files here, at build time, so the
# read-only image never needs to write them.
RUN pip install --no-cache-dir /wheels/*.whl \
    && rm -rf /wheels \
    && python -c "import uvloop, omed" \
    && groupadd --gid 65532 omed \
    && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /tmp \
        --shell /usr/sbin/nologin omed
USER 65532:65532
WORKDIR /tmp
EXPOSE 8080 8081 9443
ENTRYPOINT ["omed"]
