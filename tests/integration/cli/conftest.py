"""What the plugin's integration tests read, created as OME would have left it.

``chat``: a :class:`ChatObjects` for the test's namespace: the InferenceService ``chat``
(:meth:`ChatObjects.service`) and the body of one of its InferenceReplicas
(:meth:`ChatObjects.replica`: the label, the parentRef and the controller owner reference to
the service's uid that OME writes; the ``replicas`` and ``runners`` the CRD requires).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from omed.kube.client import KubeClient
from omed.kube.resources import INFERENCE_SERVICES

SERVICE = "chat"
TEMPLATE = {
    "metadata": {"labels": {"app": "chat"}},
    "spec": {"containers": [{"name": "ome-container", "image": "ome/serving:1.0"}]},
}


@dataclass(frozen=True)
class ChatObjects:
    kube: KubeClient
    namespace: str

    async def service(self) -> dict[str, Any]:
        """Create the InferenceService ``chat`` (an empty spec); the stored object."""
        created: dict[str, Any] = await self.kube.create(
            INFERENCE_SERVICES,
            {
                "apiVersion": "ome.io/v1beta1",
                "kind": "InferenceService",
                "metadata": {"name": SERVICE},
                "spec": {},
            },
            self.namespace,
        )
        return created

    @staticmethod
    def replica(
        name: str,
        uid: str,
        *,
        component: str = "engine",
        annotations: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """The body of InferenceReplica ``name`` of ``chat`` (whose uid is ``uid``)."""
        metadata: dict[str, Any] = {
            "name": name,
            "labels": {"ome.io/inferenceservice": SERVICE},
            "ownerReferences": [
                {
                    "apiVersion": "ome.io/v1beta1",
                    "kind": "InferenceService",
                    "name": SERVICE,
                    "uid": uid,
                    "controller": True,
                }
            ],
        }
        if annotations:
            metadata["annotations"] = dict(annotations)
        return {
            "apiVersion": "ome.io/v1beta1",
            "kind": "InferenceReplica",
            "metadata": metadata,
            "spec": {
                "component": component,
                "parentRef": {"name": SERVICE},
                "replicas": 0,
                "runners": [{"name": "default", "template": TEMPLATE}],
            },
        }


@pytest.fixture
def chat(kube: KubeClient, namespace: str, crds_installed: None) -> ChatObjects:
    return ChatObjects(kube=kube, namespace=namespace)
