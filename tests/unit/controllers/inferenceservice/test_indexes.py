"""The InferenceService controller's index of services by the replicas they front."""

from __future__ import annotations

from typing import Any

from omed.controllers.inferenceservice.shell.controller import replica_ref_index


def _isvc(spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "front", "namespace": "prod"}, "spec": spec}


def test_each_fronted_replica_once_with_its_namespace() -> None:
    spec = {"replicaRefs": [{"name": "pool-a"}, {"name": "pool-b"}, {"name": "pool-a"}]}
    assert replica_ref_index(_isvc(spec)) == ("prod/pool-a", "prod/pool-b")


def test_malformed_or_missing_refs_file_nothing() -> None:
    assert replica_ref_index(_isvc({})) == ()
    assert replica_ref_index(_isvc(None)) == ()
    assert replica_ref_index(_isvc({"replicaRefs": "pool-a"})) == ()
    assert replica_ref_index(_isvc({"replicaRefs": [{"name": 3}, "x", {}]})) == ()
