# omed, OME's controller manager for the OMENative mode.
#
#   docker build -t REGISTRY/omed:0.1.0 .        (docs/install.md: any OCI builder)
#
# The base is pinned to an exact tag (Python 3.11.14 on Debian 12); release builds can pin
# its digest as well (docs/install.md). It names no registry host: the builder's own
# registry configuration (or a mirror) decides where it comes from.
#
# Three stages: `build` makes omed's wheel; `rootfs` installs it with its dependencies, then
# removes pip, setuptools, wheel, every shell, and perl (which could stand in for one); the
# final stage copies that filesystem onto an empty image, so its one layer holds neither pip
# nor a shell (none hidden in a lower layer either), and it has no RUN that would need one.
#
# The image holds the product only: the dev cluster and the demo (devcluster/) are a
# distribution of their own, neither copied nor installed here (tests/unit/test_dockerfile.py).
#
# The image runs as uid 65532 on a read-only root filesystem: nothing is written outside
# /tmp, which the ome-resources chart mounts as an emptyDir (docs/deploy.md).

FROM python:3.11.14-slim-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY omed ./omed
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11.14-slim-bookworm AS rootfs
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
COPY --from=build /wheels /wheels
# The wheel brings its dependencies, uvloop among them; the import checks that the event
# loop omed runs on installed. pip compiles the .pyc files here, at build time, so the
# read-only image never needs to write them. The shells go last: this RUN's own shell is
# already running.
RUN pip install --no-cache-dir /wheels/*.whl \
    && rm -rf /wheels \
    && python -c "import uvloop, omed" \
    && groupadd --gid 65532 omed \
    && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /tmp \
        --shell /usr/sbin/nologin omed \
    && python -m pip uninstall --yes --no-cache-dir pip setuptools wheel \
    && rm -rf /usr/local/bin/pip* /root/.cache \
    && rm -f /bin/sh /bin/dash /bin/bash /bin/rbash \
        /usr/bin/sh /usr/bin/dash /usr/bin/bash /usr/bin/rbash /usr/bin/perl /usr/bin/perl5*

FROM scratch
# The whole filesystem on purpose: that is how pip and the shells leave the image for good
# (a RUN that removed them here would need a shell, and leave them in the base's layers).
# hadolint ignore=DL3067
COPY --from=rootfs / /
# What the base image's environment set (lost with FROM scratch), and omed's own.
ENV PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
# The exec form needs no shell: it checks what the image is for and what it mustn't hold.
RUN ["python3", "-c", "import importlib.util as u, shutil, omed, uvloop; assert u.find_spec('pip') is None, 'pip'; assert not [s for s in ('sh', 'bash', 'dash', 'perl') if shutil.which(s)], 'a shell'"]
LABEL org.opencontainers.image.title="omed" \
      org.opencontainers.image.description="OME's controller manager for the OMENative deployment mode" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/sgl-project/ome" \
      org.opencontainers.image.url="https://github.com/sgl-project/ome" \
      org.opencontainers.image.vendor="OME" \
      org.opencontainers.image.base.name="python:3.11.14-slim-bookworm"
USER 65532:65532
WORKDIR /tmp
EXPOSE 8080 8081 9443
ENTRYPOINT ["omed"]
