"""The admission webhooks this manager serves, wired to the config cache and feature gates.

Why here: the webhook handlers (:mod:`omed.webhooks`) are pure rules plus one seam, the
``deploy`` entry for the defaulter; the manager owns where that entry comes from (the
``--config-cache-ttl`` cache) and which policy features are on (the CRDs found at start).

Invariant: the defaulter parses only the ``deploy`` entry of each cache read, so a bad
``lifecycle`` or ``ingress`` entry can't change what the webhook does.
"""

from __future__ import annotations

from collections.abc import Mapping

from omed.config import ConfigCache, DeployConfig, Options, deploy_entry
from omed.config.entries import CONFIGMAP_NAME
from omed.kube.client import KubeClient
from omed.kube.resources import CONFIGMAPS
from omed.webhooks import admission_handlers
from omed.webhooks.policies import FeatureGates
from omed.webhooks.server import WebhookServer

__all__ = ["build_webhook_server", "configmap_data"]


async def configmap_data(client: KubeClient, namespace: str) -> Mapping[str, str]:
    """The data of the ``inferenceservice-config`` ConfigMap: what the config cache fetches."""
    configmap = await client.get(CONFIGMAPS, CONFIGMAP_NAME, namespace)
    data: Mapping[str, str] = (configmap or {}).get("data") or {}
    return data


def build_webhook_server(
    *, options: Options, config: ConfigCache, gates: FeatureGates
) -> WebhookServer:
    """The server for ``--webhook``, on ``--webhook-port`` with ``--webhook-cert-dir``."""

    async def deploy_config() -> DeployConfig:
        return deploy_entry(await config.get())

    return WebhookServer(
        handlers=admission_handlers(gates=gates, deploy_config=deploy_config),
        port=options.webhook_port,
        cert_dir=options.webhook_cert_dir,
    )
