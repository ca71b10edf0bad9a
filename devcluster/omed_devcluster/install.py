"""omed installed as an operator installs it, on the development control plane.

The charts go in with the real ``helm``: ``ome-crd``, then ``ome-resources`` into namespace
``ome``. Nothing here runs containers, so the Deployment is installed with no replicas and
each manager replica runs as a local process the way its pod would run it (:class:`OmeInstall`):

* the ``manager`` container's arguments and environment, read from the Deployment helm
  rendered (``POD_NAMESPACE``, ``SECRET_NAME``, ``POD_NAME`` resolved as the kubelet would);
* the chart's ConfigMap, read by the manager from its namespace as in the cluster;
* the chart's ServiceAccount credentials: a token from the TokenRequest API in a kubeconfig
  of its own, never the admin's, so a permission the chart lacks fails as it would in a pod;
* the webhook certificate: the chart's Secret, written to a directory as its volume is.

What a pod's own network namespace gives (ports of its own), a process gets by appending
``--metrics-bind-address``, ``--health-probe-addr``, ``--webhook-port`` and
``--webhook-cert-dir`` after the chart's arguments (the last occurrence of a flag wins), and
``--kubeconfig`` for the token. Nothing else is added.

The chart's webhook configurations reach those processes through the chart's own Service:
each process gets an EndpointSlice of that Service (addressType FQDN, address ``127.0.0.1``,
its webhook port), as an endpoint of a ready pod would; the API server, started with
``--enable-aggregator-routing``, sends admission calls to a ready endpoint of the Service
with the Service's DNS name as the TLS server name, so the chart's certificate is checked as
in a cluster. An FQDN slice is used because the API server refuses loopback addresses in IP
slices (and ``localhost``, one label, is not a valid FQDN, while the dotted ``127.0.0.1``
is, and dials as itself); a URL override instead would need a certificate for an IP the
chart doesn't issue. The slice goes when the process is stopped, as a dead pod's endpoint
would.
"""

from __future__ import annotations

import base64
import dataclasses
import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHARTS = ROOT / "deploy" / "charts"
CRD_CHART = CHARTS / "ome-crd"
CRD_FILES = CRD_CHART / "files" / "crds"
RESOURCES_CHART = CHARTS / "ome-resources"
NAMESPACE = "ome"
CRD_RELEASE = "ome-crd"
RESOURCES_RELEASE = "ome"
CONTAINER = "manager"
ENDPOINT_MANAGER = "omed-devcluster"
"""The ``endpointslice.kubernetes.io/managed-by`` of the slices written here, so the
EndpointSlice controller leaves them alone."""
TOKEN_SECONDS = 24 * 3600

BASE_VALUES: dict[str, Any] = {"ome": {"controller": {"replicaCount": 0}}}
"""Always set: the Deployment's pods would never run here (no container runtime); the
processes of :meth:`OmeInstall.manager_command` are its replicas."""


class InstallError(RuntimeError):
    """helm or kubectl failed; the message carries the command and its output."""


@dataclasses.dataclass(frozen=True)
class ManagerPodSpec:
    """What the rendered Deployment gives the ``manager`` container."""

    args: tuple[str, ...]
    env: tuple[tuple[str, str | None, str | None], ...]
    """(name, value, fieldPath) in the container's order."""
    service_account: str
    termination_grace_period: int

    def environment(self, *, namespace: str, pod_name: str) -> dict[str, str]:
        """The variables as the kubelet sets them for pod ``pod_name`` (later ones win)."""
        fields = {"metadata.namespace": namespace, "metadata.name": pod_name}
        out: dict[str, str] = {}
        for name, value, field in self.env:
            if field is not None:
                if field not in fields:
                    raise InstallError(f"env {name}: fieldRef {field} is not simulated")
                out[name] = fields[field]
            else:
                out[name] = value or ""
        return out


def _run(args: Sequence[str], *, stdin: str | None = None, timeout: float = 180) -> str:
    result = subprocess.run(
        list(args), input=stdin, capture_output=True, text=True, timeout=timeout, check=False
    )
    if result.returncode != 0:
        raise InstallError(
            f"{' '.join(args[:4])} ... failed ({result.returncode}):\n{result.stderr}"
        )
    return result.stdout


def _established(crd: Mapping[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def deep_merge(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """``extra`` over ``base``, maps merged key by key (as helm merges values files)."""
    out = dict(base)
    for key, value in extra.items():
        current = out.get(key)
        if isinstance(current, Mapping) and isinstance(value, Mapping):
            out[key] = deep_merge(current, value)
        else:
            out[key] = value
    return out


class OmeInstall:
    """The two charts installed with helm, and the manager run as their Deployment would run it.

    ``plane`` is a started :class:`~omed_devcluster.controlplane.ControlPlane`; ``workdir``
    holds the values file, the manager's kubeconfig and its certificate directory.
    """

    def __init__(self, plane: Any, *, workdir: Path, namespace: str = NAMESPACE) -> None:
        self.plane = plane
        self.namespace = namespace
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.pod: ManagerPodSpec | None = None
        self.webhook_service = ""
        self.webhook_port_name = ""
        self.kubeconfig_path = workdir / "manager.kubeconfig"
        self.cert_dir = workdir / "serving-certs"
        self.manifest: list[dict[str, Any]] = []

    # -- helm ---------------------------------------------------------------------------------
    def _helm(self, *args: str) -> str:
        return _run(
            [str(self.plane.binaries.helm), "--kubeconfig", str(self.plane.kubeconfig_path), *args]
        )

    def install_crds(self) -> None:
        """``helm upgrade --install ome-crd``, taking over CRDs applied without helm, then wait
        until the API server serves them."""
        self._helm("upgrade", "--install", CRD_RELEASE, str(CRD_CHART), "--take-ownership")
        names = sorted(path.name.removesuffix(".yaml") for path in CRD_FILES.glob("*.yaml"))
        deadline = time.monotonic() + 60
        for name in names:
            path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
            while not _established(self.plane.request_json("GET", path)):
                if time.monotonic() > deadline:
                    raise InstallError(f"CRD {name} not Established within 60s")
                time.sleep(0.1)

    def install(self, values: Mapping[str, Any] | None = None) -> None:
        """``helm install ome-resources`` into the namespace with ``values`` over the chart's
        (and :data:`BASE_VALUES`), then read what the manager process needs."""
        merged = deep_merge(values or {}, BASE_VALUES)
        values_path = self.workdir / "values.yaml"
        values_path.write_text(yaml.safe_dump(merged, sort_keys=False))
        self._helm(
            "upgrade",
            "--install",
            RESOURCES_RELEASE,
            str(RESOURCES_CHART),
            "--namespace",
            self.namespace,
            "--create-namespace",
            "--values",
            str(values_path),
        )
        self.manifest = [
            doc
            for doc in yaml.safe_load_all(
                self._helm("get", "manifest", RESOURCES_RELEASE, "--namespace", self.namespace)
            )
            if doc
        ]
        self.pod = self._manager_pod()
        self._read_webhook_service()
        self._write_certificates()
        self._write_kubeconfig()

    def hooks(self) -> list[dict[str, Any]]:
        """The installed release's hook objects (``helm get hooks``), such as its test Pod."""
        text = self._helm("get", "hooks", RESOURCES_RELEASE, "--namespace", self.namespace)
        return [doc for doc in yaml.safe_load_all(text) if doc]

    def uninstall(self) -> None:
        """``helm uninstall`` the resources chart (the CRD chart stays: its CRDs are kept)."""
        self._helm("uninstall", RESOURCES_RELEASE, "--namespace", self.namespace, "--wait")

    # -- what the pod gets --------------------------------------------------------------------
    def _find(self, kind: str) -> list[dict[str, Any]]:
        return [doc for doc in self.manifest if doc.get("kind") == kind]

    def _manager_pod(self) -> ManagerPodSpec:
        (deployment,) = self._find("Deployment")
        spec = deployment["spec"]["template"]["spec"]
        (container,) = [c for c in spec["containers"] if c["name"] == CONTAINER]
        env = []
        for item in container.get("env") or ():
            source = item.get("valueFrom")
            if source is not None and "fieldRef" not in source:
                raise InstallError(f"env {item['name']}: only values and fieldRefs are simulated")
            field = source["fieldRef"]["fieldPath"] if source else None
            env.append((item["name"], item.get("value"), field))
        return ManagerPodSpec(
            args=tuple(str(a) for a in container.get("args") or ()),
            env=tuple(env),
            service_account=spec.get("serviceAccountName") or "default",
            termination_grace_period=int(spec.get("terminationGracePeriodSeconds", 30)),
        )

    def _read_webhook_service(self) -> None:
        configs = self._find("ValidatingWebhookConfiguration")
        service = configs[0]["webhooks"][0]["clientConfig"]["service"]
        self.webhook_service = service["name"]
        (svc,) = [s for s in self._find("Service") if s["metadata"]["name"] == service["name"]]
        (port,) = [p for p in svc["spec"]["ports"] if p["port"] == service.get("port", 443)]
        self.webhook_port_name = port["name"]

    def _write_certificates(self) -> None:
        secret_name = next(
            value for name, value, _ in self.spec.env if name == "SECRET_NAME" and value
        )
        secret = self.plane.request_json(
            "GET", f"/api/v1/namespaces/{self.namespace}/secrets/{secret_name}"
        )
        self.cert_dir.mkdir(exist_ok=True)
        for key in ("tls.crt", "tls.key"):
            path = self.cert_dir / key
            path.write_bytes(base64.b64decode(secret["data"][key]))
            path.chmod(0o600)

    def _write_kubeconfig(self) -> None:
        """A kubeconfig holding a TokenRequest token of the chart's ServiceAccount."""
        answer = self.plane.request_json(
            "POST",
            f"/api/v1/namespaces/{self.namespace}/serviceaccounts/"
            f"{self.spec.service_account}/token",
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": TOKEN_SECONDS},
            },
        )
        config = self.plane.kubeconfig()
        config["users"] = [
            {"name": self.spec.service_account, "user": {"token": answer["status"]["token"]}}
        ]
        config["contexts"][0]["context"]["user"] = self.spec.service_account
        self.kubeconfig_path.write_text(yaml.safe_dump(config, sort_keys=False))
        self.kubeconfig_path.chmod(0o600)

    @property
    def spec(self) -> ManagerPodSpec:
        if self.pod is None:
            raise InstallError("the resources chart is not installed")
        return self.pod

    @property
    def user(self) -> str:
        """The manager's identity as the API server's authorizer sees it."""
        return f"system:serviceaccount:{self.namespace}:{self.spec.service_account}"

    def manager_command(
        self,
        pod_name: str,
        *,
        metrics_port: int,
        health_port: int,
        webhook_port: int,
        python: str,
        extra: Sequence[str] = (),
    ) -> tuple[list[str], dict[str, str]]:
        """argv and environment of replica ``pod_name``: the container's arguments, what a
        pod's network namespace and mounts give it, then ``extra`` (last, so it wins)."""
        argv = [
            python,
            "-m",
            "omed",
            *self.spec.args,
            f"--kubeconfig={self.kubeconfig_path}",
            f"--metrics-bind-address=127.0.0.1:{metrics_port}",
            f"--health-probe-addr=127.0.0.1:{health_port}",
            f"--webhook-port={webhook_port}",
            f"--webhook-cert-dir={self.cert_dir}",
            *extra,
        ]
        inherited = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG",)}
        env = {**inherited, **self.spec.environment(namespace=self.namespace, pod_name=pod_name)}
        return argv, env

    # -- webhook endpoints ----------------------------------------------------------------------
    def _slice_name(self, pod_name: str) -> str:
        return f"{self.webhook_service}-{pod_name}"[:63].rstrip("-.")

    def publish_endpoint(self, pod_name: str, port: int) -> None:
        """Make replica ``pod_name``'s webhook port an endpoint of the chart's Service."""
        body = {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": self._slice_name(pod_name),
                "namespace": self.namespace,
                "labels": {
                    "kubernetes.io/service-name": self.webhook_service,
                    "endpointslice.kubernetes.io/managed-by": ENDPOINT_MANAGER,
                },
            },
            "addressType": "FQDN",
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
            "ports": [{"name": self.webhook_port_name, "port": port, "protocol": "TCP"}],
        }
        self.plane.request_json(
            "POST", f"/apis/discovery.k8s.io/v1/namespaces/{self.namespace}/endpointslices", body
        )

    def withdraw_endpoint(self, pod_name: str) -> None:
        self.plane.request_json(
            "DELETE",
            f"/apis/discovery.k8s.io/v1/namespaces/{self.namespace}/endpointslices/"
            f"{self._slice_name(pod_name)}",
            missing_ok=True,
        )

    def configmap_name(self) -> str:
        (configmap,) = self._find("ConfigMap")
        return str(configmap["metadata"]["name"])
