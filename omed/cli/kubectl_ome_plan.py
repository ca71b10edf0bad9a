"""``kubectl ome instance plan`` and ``kubectl ome get ir``: the flags checked, the reads,
and where each line goes.

Why a module of its own: ``instance plan`` runs the InferenceReplica controller's own
assembly and planner, so it imports the controller's core, the informers' projections and
the manager's start-up checks, which no other command needs; :mod:`omed.cli.kubectl_ome`
imports this module only when one of these two commands runs. What they print is decided in
:mod:`omed.cli.instance_plan` and :mod:`omed.cli.get_ir`, without I/O.

Invariant: both only read (get and list); every check of a flag's value happens before the
kubeconfig is loaded.
"""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Final

from omed.cli import get_ir, instance_plan
from omed.cli.instances import Collection, render_table
from omed.cli.kubectl_ome import EXIT_OK, OUTPUTS, CommandError, Streams, UsageError
from omed.cli.kubectl_ome_instance import (
    check_component,
    check_output,
    component_replica,
    dump,
    read_collection,
    with_client,
)
from omed.kube.client import KubeClient
from omed.kube.errors import ApiError
from omed.kube.resources import INFERENCE_REPLICAS

__all__ = ["GET_OUTPUTS", "get_ir_command", "plan_command"]

GET_OUTPUTS: Final = ("table", "name", "json", "yaml")
NAME_PREFIX: Final = "inferencereplica.ome.io/"
"""What ``kubectl get -o name`` prints before an InferenceReplica's name."""


def _time(now: dt.datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


async def plan_command(args: argparse.Namespace, io: Streams) -> int:
    """``kubectl ome instance plan``."""
    check_output(args, "plan", OUTPUTS)
    check_component(args)
    now = dt.datetime.fromtimestamp(io.now(), tz=dt.UTC)

    async def work(client: KubeClient, namespace: str) -> int:
        collection = await read_collection(client, namespace, args.inferenceservice)
        return await _plan(client, args, collection, namespace=namespace, io=io, now=now)

    return await with_client(args, work)


async def _plan(
    client: KubeClient,
    args: argparse.Namespace,
    collection: Collection,
    *,
    namespace: str,
    io: Streams,
    now: dt.datetime,
) -> int:
    """The controller's next pass over the component, from live reads (get and list only),
    decided by the controller's own planner at ``now``."""
    read, source = component_replica(
        collection, args, namespace=namespace, cannot=f"cannot plan the {args.component}"
    )
    try:
        inputs = await instance_plan.read_inputs(
            client,
            source,
            manager_namespace=args.manager_namespace,
            parent=collection.isvc,
        )
        planned = instance_plan.plan_pass(inputs, now=now)
    except instance_plan.PlanError as exc:
        raise CommandError(str(exc)) from None
    steps = instance_plan.steps_of(planned)
    if args.output == "table":
        header = (
            f"InferenceReplica {namespace}/{read.replica}: the controller's next pass at "
            f"{_time(now)}"
        )
        io.out.write(instance_plan.render(steps, notes=inputs.notes, header=header))
    else:
        report = instance_plan.report(
            isvc=args.inferenceservice,
            component=args.component,
            target=planned.target,
            steps=steps,
            now=now,
            notes=inputs.notes,
        )
        io.out.write(dump(report, args.output))
    return EXIT_OK


async def get_ir_command(args: argparse.Namespace, io: Streams) -> int:
    """``kubectl ome get ir``: the InferenceReplicas of one namespace (``-A``: of all), or
    those named."""
    if args.output not in GET_OUTPUTS:
        raise UsageError(
            f'unknown output format "{args.output}" for get ir (use {", ".join(GET_OUTPUTS)})'
        )
    if args.all_namespaces and args.namespace:
        raise UsageError("-A and -n can't be used together")
    if args.all_namespaces and args.names:
        raise UsageError("a name can't be given with -A: name the namespace with -n instead")
    now = dt.datetime.fromtimestamp(io.now(), tz=dt.UTC)

    async def work(client: KubeClient, namespace: str) -> int:
        where = None if args.all_namespaces else namespace
        try:
            if args.names:
                found = [await client.get(INFERENCE_REPLICAS, n, where) for n in args.names]
            else:
                found = list(await client.list_all(INFERENCE_REPLICAS, where))
        except ApiError as exc:
            scope = "in every namespace" if where is None else f'in namespace "{where}"'
            raise CommandError(f"read InferenceReplicas {scope}: {exc.message}") from None
        if args.output in ("json", "yaml"):
            io.out.write(dump(get_ir.report(found), args.output))
        elif not found:
            io.err.write(get_ir.nothing_found(where) + "\n")
        elif args.output == "name":
            items = get_ir.report(found)["items"]
            io.out.write("".join(f"{NAME_PREFIX}{item['name']}\n" for item in items))
        else:
            rows = get_ir.rows(found, now=now, all_namespaces=where is None)
            io.out.write(render_table(rows[1:] if args.no_headers else rows))
        return EXIT_OK

    return await with_client(args, work)
