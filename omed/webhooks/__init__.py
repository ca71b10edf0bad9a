"""omed's admission webhooks, served by every manager replica.

Why: the API server asks these webhooks before it stores an InferenceService, an
InferenceReplica or one of omed's runtime revisions, so a mistake is refused when the user
writes it, with a message that names the field, instead of surfacing later as a rollout that
never moves.

* ``/validate-ome-io-v1beta1-inferenceservice``: :class:`InferenceServiceValidator`
* ``/validate-ome-io-v1beta1-inferencereplica``: :class:`InferenceReplicaValidator`
* ``/validate-apps-v1-controllerrevision``: :class:`ControllerRevisionValidator` (the runtime
  revisions omed wrote keep their data, labels and revision)
* ``/mutate-ome-io-v1beta1-inferenceservice``: :class:`InferenceServiceDefaulter`

:class:`WebhookServer` serves them over HTTPS (port 9443, ``tls.crt``/``tls.key`` from
``/tmp/k8s-webhook-server/serving-certs``). The manager builds it with
:func:`admission_handlers`. docs/webhooks.md lists every rule, message and warning.

Invariant: the validators are pure functions of the AdmissionReview (no API reads), so any
replica answers any request the same way, in well under a millisecond; only the defaulter
reads the ConfigMap's ``deploy`` entry, through the callable the manager hands in.
"""

from __future__ import annotations

from omed.webhooks.controllerrevision import ControllerRevisionValidator
from omed.webhooks.defaulting import DeployConfigSource, InferenceServiceDefaulter
from omed.webhooks.inferencereplica import InferenceReplicaValidator
from omed.webhooks.inferenceservice import InferenceServiceValidator
from omed.webhooks.policies import FeatureGates
from omed.webhooks.review import AdmissionRequest, AdmissionResponse
from omed.webhooks.server import (
    DEFAULT_CERT_DIR,
    DEFAULT_PORT,
    AdmissionHandler,
    WebhookServer,
)
from omed.webhooks.tls import CertificateError

__all__ = [
    "DEFAULT_CERT_DIR",
    "DEFAULT_PORT",
    "AdmissionHandler",
    "AdmissionRequest",
    "AdmissionResponse",
    "CertificateError",
    "ControllerRevisionValidator",
    "DeployConfigSource",
    "FeatureGates",
    "InferenceReplicaValidator",
    "InferenceServiceDefaulter",
    "InferenceServiceValidator",
    "WebhookServer",
    "admission_handlers",
]


def admission_handlers(
    *, gates: FeatureGates, deploy_config: DeployConfigSource
) -> list[AdmissionHandler]:
    """The webhooks, as the manager serves them."""
    return [
        InferenceServiceValidator(gates=gates),
        InferenceReplicaValidator(),
        ControllerRevisionValidator(),
        InferenceServiceDefaulter(deploy_config=deploy_config),
    ]
