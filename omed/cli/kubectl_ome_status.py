"""``kubectl ome instance status``: one Instance, its deployment mode, live pods and events.

Why a module of its own: status reads more than the other commands (the runtime, the
manager's ConfigMap, pods, events) and resolves the deployment mode as the InferenceService
controller does, so it needs parts of the manager (the controller's mode resolution, the
ConfigMap's parser, the webhook's credential patterns) that no other command imports;
:mod:`omed.cli.kubectl_ome` imports this module only when status runs. What the report says
is decided in :mod:`omed.cli.instance_status`, without I/O.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any, Final, TextIO

from omed.api.constants import (
    KIND_CLUSTER_SERVING_RUNTIME,
    LABEL_COMPONENT,
    LABEL_INFERENCE_SERVICE,
    LABEL_INSTANCE_INDEX,
)
from omed.cli import instance_status
from omed.cli.instances import Collection, render_table
from omed.cli.kubectl_ome import EXIT_ERROR, EXIT_OK, STATUS_OUTPUTS, Streams
from omed.cli.kubectl_ome_instance import (
    check_component,
    check_output,
    dump,
    read_collection,
    with_client,
)
from omed.controllers.inferenceservice.core.mode import resolve_mode_json as resolve_mode
from omed.kube.client import KubeClient, Resource
from omed.kube.errors import ApiError, NotFound
from omed.kube.resources import (
    CLUSTER_SERVING_RUNTIMES,
    CONFIGMAPS,
    EVENTS,
    PODS,
    SERVING_RUNTIMES,
)

__all__ = ["find_runtime", "status_command"]

CONFIG_NAME: Final = "inferenceservice-config"


async def status_command(args: argparse.Namespace, io: Streams) -> int:
    """``kubectl ome instance status``."""
    check_output(args, "status", STATUS_OUTPUTS)
    check_component(args)

    async def work(client: KubeClient, namespace: str) -> int:
        collection = await read_collection(client, namespace, args.inferenceservice)
        return await _status(client, args, collection, namespace=namespace, out=io.out)

    return await with_client(args, work)


async def find_runtime(
    client: KubeClient, isvc: dict[str, Any], namespace: str
) -> tuple[dict[str, Any] | None, str, str | None]:
    """(runtime, origin, error) as the InferenceService controller finds the runtime: a
    ServingRuntime of the namespace, else (or for kind ClusterServingRuntime) the cluster's."""
    ref = (isvc.get("spec") or {}).get("runtime") or {}
    name = ref.get("name") if isinstance(ref, dict) else None
    if not name:
        return None, "NoRuntime", None
    lookups: list[tuple[Resource, str | None]] = []
    if ref.get("kind") != KIND_CLUSTER_SERVING_RUNTIME:
        lookups.append((SERVING_RUNTIMES, namespace))
    if not ref.get("kind") or ref.get("kind") == KIND_CLUSTER_SERVING_RUNTIME:
        lookups.append((CLUSTER_SERVING_RUNTIMES, None))
    for resource, where in lookups:
        try:
            found: dict[str, Any] = await client.get(resource, str(name), where)
        except NotFound:
            continue
        except ApiError as exc:
            return None, "RuntimeUnreadable", f"get {resource.kind} {name}: {exc.message}"
        return found, "LiveRuntime", None
    return None, "RuntimeNotFound", None


async def _status(
    client: KubeClient,
    args: argparse.Namespace,
    collection: Collection,
    *,
    namespace: str,
    out: TextIO,
) -> int:
    errors: list[str] = []
    isvc = dict(collection.isvc)
    runtime, origin, runtime_error = await find_runtime(client, isvc, namespace)
    if runtime_error:
        errors.append(runtime_error)
    default_mode: str | None = None
    default_known = True
    if resolve_mode(isvc, runtime, None)[1] == "Default":  # only the manager's entry is left
        # The entry's models (pydantic) are imported only for a service whose mode is left to
        # the manager's entry.
        from omed.config.reconcile import ReconcileConfigError, deploy_entry

        try:
            config = await client.get(CONFIGMAPS, CONFIG_NAME, args.manager_namespace)
            default_mode = deploy_entry(config.get("data") or {}).default_deployment_mode
        except (ApiError, ReconcileConfigError) as exc:
            default_known = False
            reason = exc.message if isinstance(exc, ApiError) else str(exc)
            errors.append(f"read {args.manager_namespace}/{CONFIG_NAME}: {reason}")
    deploy = instance_status.deployment(
        isvc, runtime, origin=origin, default_mode=default_mode, default_known=default_known
    )
    name = args.inferenceservice
    selector = (
        f"{LABEL_INFERENCE_SERVICE}={name},{LABEL_COMPONENT}={args.component},"
        f"{LABEL_INSTANCE_INDEX}={args.index}"
    )
    pods: list[dict[str, Any]] | None = None
    events: list[dict[str, Any]] | None = None
    try:
        pods = await client.list_all(PODS, namespace, labelSelector=selector)
    except ApiError as exc:
        errors.append(f"list pods: {exc.message}")
    if pods:
        # Only the pods the report shows, each by name: a namespace's Warning events can be
        # many more than one Instance's.
        shown = [str(p["metadata"]["name"]) for p in instance_status.pick_pods(pods)]
        try:
            found = await asyncio.gather(
                *(
                    client.list_all(
                        EVENTS,
                        namespace,
                        fieldSelector=f"involvedObject.kind=Pod,involvedObject.name={pod},"
                        "type=Warning",
                    )
                    for pod in shown
                )
            )
        except ApiError as exc:
            errors.append(f"list events: {exc.message}")
        else:
            events = [event for each in found for event in each]
    report = instance_status.build(
        collection,
        component=args.component,
        index=args.index,
        deploy=deploy,
        pods=pods,
        events=events,
        read_errors=errors,
    )
    if args.output in ("table", "wide"):
        rows = instance_status.table_rows(report, wide=args.output == "wide")
        out.write(render_table(rows))
    else:
        out.write(dump(report.report, args.output))
    return EXIT_ERROR if report.state == instance_status.UNAVAILABLE_STATE else EXIT_OK
