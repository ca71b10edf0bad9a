"""Where the control plane's binaries come from, and how they are built when missing.

No release tarball or container image is reachable from the machines omed is developed on,
but the Go module proxy is. So ``kube-apiserver``, ``kube-controller-manager``,
``kube-scheduler``, ``kubectl``, ``etcd`` and ``helm`` are resolved in this order:

1. ``KUBEBUILDER_ASSETS`` (envtest's convention: one directory holding the binaries), or one
   ``TEST_ASSET_<NAME>`` variable per binary (``TEST_ASSET_KUBE_APISERVER``,
   ``TEST_ASSET_KUBE_CONTROLLER_MANAGER``, ``TEST_ASSET_KUBE_SCHEDULER``, ...);
2. a versioned cache directory outside the repository
   (``$OMED_CACHE_DIR`` or ``~/.cache/omed``, then ``kubernetes-v1.36.3/`` and so on);
3. a build from Go modules into that cache, showing progress.

Invariant: a binary is either absent from the cache or complete. Builds write to a temporary
name and rename it into place, under a file lock, so two processes that both find the cache
empty build once and an interrupted build leaves nothing that looks finished.

``k8s.io/kubernetes`` requires its staging modules at ``v0.0.0``, which the proxy does not
serve, and a dependency's own ``replace`` lines are ignored; so a throwaway wrapper module
requires it and replaces every staging module with the matching ``v0.Y.Z``. The version is
stamped with ``-X`` so that ``/version`` reports it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

KUBERNETES_VERSIONS = ("v1.36.3", "v1.35.4", "v1.34.4")
"""Preferred first; the next is tried only when building the previous one fails."""
ETCD_VERSION = "v3.6.16"
HELM_VERSION = "v3.22.0"
PROMTOOL_VERSION = "v0.316.0"
"""Prometheus 3.x's Go module version (``github.com/prometheus/prometheus``, whose v3.N.M
releases are tagged v0.3NN.M for Go): promtool, which checks the chart's alert rules."""

KUBE_BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
"""Built together from one ``k8s.io/kubernetes`` module, so they always share a version."""
ALL_BINARIES = (*KUBE_BINARIES, "etcd", "helm")

_ENV_NAMES = {
    "kube-apiserver": "TEST_ASSET_KUBE_APISERVER",
    "kube-controller-manager": "TEST_ASSET_KUBE_CONTROLLER_MANAGER",
    "kube-scheduler": "TEST_ASSET_KUBE_SCHEDULER",
    "kubectl": "TEST_ASSET_KUBECTL",
    "etcd": "TEST_ASSET_ETCD",
    "helm": "TEST_ASSET_HELM",
    "promtool": "TEST_ASSET_PROMTOOL",
}

_GO_LINES = {"1.34": "1.24.0", "1.35": "1.25.0", "1.36": "1.26.0", "1.37": "1.27.0"}


class BinaryError(RuntimeError):
    """A binary could not be found or built; the message says what was tried."""


@dataclasses.dataclass(frozen=True)
class Binaries:
    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kubectl: Path
    etcd: Path
    helm: Path
    kubernetes_version: str

    def as_dict(self) -> dict[str, str]:
        return {
            "kube-apiserver": str(self.kube_apiserver),
            "kube-controller-manager": str(self.kube_controller_manager),
            "kube-scheduler": str(self.kube_scheduler),
            "kubectl": str(self.kubectl),
            "etcd": str(self.etcd),
            "helm": str(self.helm),
            "kubernetes-version": self.kubernetes_version,
        }


def cache_root() -> Path:
    base = os.environ.get("OMED_CACHE_DIR")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "omed"


def _progress(message: str) -> None:
    stamp = dt.datetime.now().strftime("%H:%M:%S")
    print(f"[omed-devcluster {stamp}] {message}", file=sys.stderr, flush=True)


def _from_environment(name: str) -> Path | None:
    explicit = os.environ.get(_ENV_NAMES[name])
    if explicit:
        path = Path(explicit)
        if not _is_executable(path):
            raise BinaryError(f"{_ENV_NAMES[name]}={explicit} is not an executable file")
        return path
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    if assets:
        path = Path(assets) / name
        if _is_executable(path):
            return path
    return None


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _cached(directory: Path, name: str) -> Path | None:
    path = directory / name
    return path if _is_executable(path) else None


@contextlib.contextmanager
def _build_lock(root: Path, what: str = "control-plane") -> Iterator[None]:
    """One builder at a time of ``what`` (the control plane's binaries, or promtool): a lock
    of its own each, so a long promtool build never holds up a control plane whose binaries
    are cached."""
    root.mkdir(parents=True, exist_ok=True)
    with (root / f".build-{what}.lock").open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _progress("another process is building the binaries; waiting for it")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _go_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update({"GOTOOLCHAIN": env.get("GOTOOLCHAIN", "local"), "CGO_ENABLED": "0"})
    env.setdefault("GOFLAGS", "-mod=mod")
    return env


def _run(args: Sequence[str], *, cwd: Path, label: str) -> str:
    """Run a go command, echoing a progress line for each package or module it reports."""
    if shutil.which("go") is None:
        raise BinaryError("the go command is not on PATH; install Go >= 1.26 to build binaries")
    started = time.monotonic()
    # Its own process group, so that an interrupted build (Ctrl-C, SIGTERM) is stopped with
    # every compiler it started, not left running.
    proc = subprocess.Popen(
        list(args),
        cwd=cwd,
        env=_go_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    last_report = 0.0
    try:
        for count, line in enumerate(proc.stdout, start=1):
            lines.append(line)
            now = time.monotonic()
            if now - last_report > 15:
                last_report = now
                _progress(f"{label}: {count} steps, {now - started:.0f}s: {line.strip()[:100]}")
        code = proc.wait()
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    if code != 0:
        tail = "".join(lines[-30:])
        raise BinaryError(f"{label} failed (exit {code}):\n{tail}")
    _progress(f"{label}: done in {time.monotonic() - started:.0f}s")
    return "".join(lines)


def _staging_modules(version: str, workdir: Path) -> tuple[list[str], str]:
    """The staging modules k8s.io/kubernetes@version requires at v0.0.0, and its go line."""
    out = _run(
        ["go", "mod", "download", "-json", f"k8s.io/kubernetes@{version}"],
        cwd=workdir,
        label=f"resolve k8s.io/kubernetes@{version}",
    )
    info = json.loads(out[out.index("{") :])
    gomod = Path(info["GoMod"]).read_text()
    staging = sorted(set(re.findall(r"^\s+(k8s\.io/[a-z0-9-]+) v0\.0\.0$", gomod, re.M)))
    match = re.search(r"^go (\d+\.\d+)", gomod, re.M)
    go_line = match.group(1) if match else "1.26"
    return staging, go_line


def _build_kubernetes(version: str, target: Path) -> None:
    minor = ".".join(version.lstrip("v").split(".")[:2])
    staging_version = "v0." + ".".join(version.lstrip("v").split(".")[1:])
    work = target.parent / f".build-kubernetes-{version}"
    work.mkdir(parents=True, exist_ok=True)
    staging, _ = _staging_modules(version, work)
    go_line = _GO_LINES.get(minor, "1.26.0")
    replaces = "\n".join(f"\t{mod} => {mod} {staging_version}" for mod in staging)
    (work / "go.mod").write_text(
        f"module omed.local/k8s-binaries\n\ngo {go_line}\n\n"
        f"godebug default=go{'.'.join(go_line.split('.')[:2])}\n\n"
        f"require k8s.io/kubernetes {version}\n\nreplace (\n{replaces}\n)\n"
    )
    _run(
        ["go", "get", *(f"k8s.io/kubernetes/cmd/{name}@{version}" for name in KUBE_BINARIES)],
        cwd=work,
        label=f"download Kubernetes {version} modules",
    )
    major, minor_num = version.lstrip("v").split(".")[:2]
    build_date = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    stamps = []
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        stamps += [
            f"-X {pkg}.gitVersion={version}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor_num}",
            f"-X {pkg}.gitTreeState=clean",
            f"-X {pkg}.buildDate={build_date}",
        ]
    ldflags = "-s -w " + " ".join(stamps)
    target.mkdir(parents=True, exist_ok=True)
    for name in KUBE_BINARIES:
        if _cached(target, name):
            continue
        partial = target / f".{name}.partial"
        _run(
            [
                "go",
                "build",
                "-v",
                "-trimpath",
                "-ldflags",
                ldflags,
                "-o",
                str(partial),
                f"k8s.io/kubernetes/cmd/{name}",
            ],
            cwd=work,
            label=f"build {name} {version}",
        )
        partial.rename(target / name)


def _build_simple(
    *, module: str, package: str, version: str, name: str, target: Path, ldflags: str = "-s -w"
) -> None:
    work = target.parent / f".build-{name}-{version}"
    work.mkdir(parents=True, exist_ok=True)
    (work / "go.mod").write_text(f"module omed.local/{name}-binary\n\ngo 1.26.0\n")
    _run(["go", "get", f"{package}@{version}"], cwd=work, label=f"download {module} {version}")
    target.mkdir(parents=True, exist_ok=True)
    partial = target / f".{name}.partial"
    _run(
        ["go", "build", "-v", "-trimpath", "-ldflags", ldflags, "-o", str(partial), package],
        cwd=work,
        label=f"build {name} {version}",
    )
    partial.rename(target / name)


def _kubernetes_from_environment() -> dict[str, Path]:
    found = {}
    for name in KUBE_BINARIES:
        path = _from_environment(name)
        if path:
            found[name] = path
    return found


def _kubernetes_cached(root: Path, found: dict[str, Path]) -> tuple[dict[str, Path], str] | None:
    """Every Kubernetes binary from the environment or one version's cache directory."""
    if len(found) == len(KUBE_BINARIES):
        return found, "external"
    for version in KUBERNETES_VERSIONS:
        directory = root / f"kubernetes-{version}"
        merged = dict(found)
        for name in KUBE_BINARIES:
            if name not in merged and (cached := _cached(directory, name)):
                merged[name] = cached
        if len(merged) == len(KUBE_BINARIES):
            return merged, version
    return None


def _kubernetes(root: Path) -> tuple[dict[str, Path], str]:
    found = _kubernetes_from_environment()
    cached = _kubernetes_cached(root, found)
    if cached:
        return cached
    errors = []
    for version in KUBERNETES_VERSIONS:
        directory = root / f"kubernetes-{version}"
        try:
            _progress(
                f"building {', '.join(KUBE_BINARIES)} {version} into {directory} "
                "(first use only: 15-35 minutes on 2 cores)"
            )
            _build_kubernetes(version, directory)
            return {name: found.get(name, directory / name) for name in KUBE_BINARIES}, version
        except BinaryError as err:
            errors.append(f"{version}: {err}")
            _progress(f"building Kubernetes {version} failed; trying the next version")
    raise BinaryError("could not build Kubernetes:\n" + "\n".join(errors))


def _assemble(kube: dict[str, Path], version: str, *, etcd: Path, helm: Path) -> Binaries:
    return Binaries(
        kube_apiserver=kube["kube-apiserver"],
        kube_controller_manager=kube["kube-controller-manager"],
        kube_scheduler=kube["kube-scheduler"],
        kubectl=kube["kubectl"],
        etcd=etcd,
        helm=helm,
        kubernetes_version=version,
    )


def _simple_binary(
    root: Path, name: str, version: str, *, module: str, package: str, ldflags: str = "-s -w"
) -> Path:
    """``name`` from the environment, else from ``root``'s ``<name>-<version>/``, else built
    there from the Go module ``module`` (its ``package``)."""
    found = _from_environment(name)
    if found:
        return found
    directory = root / f"{name}-{version}"
    cached = _cached(directory, name)
    if cached:
        return cached
    _progress(f"building {name} {version} into {directory} (first use only)")
    _build_simple(
        module=module,
        package=package,
        version=version,
        name=name,
        target=directory,
        ldflags=ldflags,
    )
    return directory / name


def _etcd(root: Path) -> Path:
    return _simple_binary(
        root,
        "etcd",
        ETCD_VERSION,
        module="go.etcd.io/etcd/server/v3",
        package="go.etcd.io/etcd/server/v3",
    )


def _helm(root: Path) -> Path:
    return _simple_binary(
        root,
        "helm",
        HELM_VERSION,
        module="helm.sh/helm/v3",
        package="helm.sh/helm/v3/cmd/helm",
        ldflags=f"-s -w -X helm.sh/helm/v3/internal/version.version={HELM_VERSION}",
    )


def ensure_binaries(*, root: Path | None = None) -> Binaries:
    """Find or build every binary; safe to call from several processes at once."""
    base = root or cache_root()
    found = find_binaries(root=base)
    if found is not None:
        return found
    with _build_lock(base):
        kube, version = _kubernetes(base)
        etcd = _etcd(base)
        helm = _helm(base)
    return _assemble(kube, version, etcd=etcd, helm=helm)


def prometheus_release(module_version: str) -> str:
    """Prometheus's release of its Go module version: ``v0.316.0`` is 3.16.0."""
    _, minor, patch = module_version.removeprefix("v").split(".")
    return f"{int(minor) // 100}.{int(minor) % 100}.{patch}"


def ensure_promtool(*, root: Path | None = None) -> Path:
    """Find or build promtool (``TEST_ASSET_PROMTOOL``, ``KUBEBUILDER_ASSETS``, the cache,
    else a build from Go modules); not one of the control plane's binaries, so only what
    checks the chart's rules asks for it. Raises :class:`BinaryError` when it can't."""
    base = root or cache_root()
    found = _from_environment("promtool") or _cached(
        base / f"promtool-{PROMTOOL_VERSION}", "promtool"
    )
    if found:
        return found
    with _build_lock(base, "promtool"):
        return _simple_binary(
            base,
            "promtool",
            PROMTOOL_VERSION,
            module="github.com/prometheus/prometheus",
            package="github.com/prometheus/prometheus/cmd/promtool",
            ldflags="-s -w -X github.com/prometheus/common/version.Version="
            + prometheus_release(PROMTOOL_VERSION),
        )


def find_binaries(*, root: Path | None = None) -> Binaries | None:
    """The binaries if they are all present, without building anything."""
    base = root or cache_root()
    try:
        cached = _kubernetes_cached(base, _kubernetes_from_environment())
        etcd = _from_environment("etcd") or _cached(base / f"etcd-{ETCD_VERSION}", "etcd")
        helm = _from_environment("helm") or _cached(base / f"helm-{HELM_VERSION}", "helm")
    except BinaryError:
        return None
    if cached and etcd and helm:
        return _assemble(cached[0], cached[1], etcd=etcd, helm=helm)
    return None
