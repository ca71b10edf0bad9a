"""The rule table of docs/deploy.md is what the installed chart grants the manager, exactly.

The ome-resources chart is installed with the real helm (``OmeInstall``), then the real
``kubectl auth can-i --list --as=<the manager's ServiceAccount>`` asks the API server (a
SelfSubjectRulesReview, impersonated) what that ServiceAccount may do in the release namespace
and in another one. The answer must hold every row of the table with its verbs, and nothing
else but what Kubernetes grants every authenticated user and every ServiceAccount by default
(:data:`DEFAULT_RESOURCE_GRANTS`, :data:`DEFAULT_NON_RESOURCE_URLS`, filtered by name).
"""

from __future__ import annotations

import asyncio
import importlib
import re
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from .charts import ROOT

pytestmark = pytest.mark.integration

DOC = ROOT / "docs" / "deploy.md"
BEGIN, END = "<!-- rbac-rules:begin -->", "<!-- rbac-rules:end -->"
HEADER = ["API group", "Resource", "Verbs", "Scope", "Resource names", "Code path"]
CLUSTER, RELEASE_NAMESPACE = "cluster", "namespace ome"
RBAC_TIMEOUT = 30.0

Grant = tuple[str, str, str]
"""(API group, resource[/subresource], resource name or "")."""

DEFAULT_RESOURCE_GRANTS: Mapping[Grant, frozenset[str]] = {
    # system:basic-user, bound to system:authenticated
    ("authorization.k8s.io", "selfsubjectaccessreviews", ""): frozenset({"create"}),
    ("authorization.k8s.io", "selfsubjectrulesreviews", ""): frozenset({"create"}),
    # system:basic-user (since 1.28: SelfSubjectReview, kubectl auth whoami)
    ("authentication.k8s.io", "selfsubjectreviews", ""): frozenset({"create"}),
}
"""The resource rules every authenticated user has; nothing else is filtered out."""

DEFAULT_NON_RESOURCE_URLS = frozenset(
    {
        # system:discovery, bound to system:authenticated
        "/api",
        "/api/*",
        "/apis",
        "/apis/*",
        "/openapi",
        "/openapi/*",
        # system:discovery and system:public-info-viewer (system:authenticated and
        # system:unauthenticated)
        "/healthz",
        "/livez",
        "/readyz",
        "/version",
        "/version/",
        # system:service-account-issuer-discovery, bound to system:serviceaccounts
        "/.well-known/openid-configuration",
        "/.well-known/openid-configuration/",
        "/openid/v1/jwks",
        "/openid/v1/jwks/",
    }
)
"""The non-resource URLs (``get`` only) that those default ClusterRoles grant."""


@dataclass(frozen=True)
class Row:
    group: str
    resource: str
    verbs: frozenset[str]
    scope: str
    names: tuple[str, ...]
    code_path: str

    def grants(self) -> Iterator[Grant]:
        for name in self.names or ("",):
            yield (self.group, self.resource, name)


_CODE = re.compile(r"`(omed(?:\.\w+)+)`")
"""A code path of the table: a module and what in it (``omed.events.EventRecorder._write``)."""


def _cells(line: str) -> list[str]:
    assert line.startswith("|") and line.endswith("|"), line
    return [cell.strip() for cell in line[1:-1].split("|")]


def _quoted(cell: str, what: str) -> list[str]:
    """The comma-separated backquoted values of a cell (``""`` is the empty string)."""
    values = [v.strip() for v in cell.split(",")]
    for value in values:
        assert re.fullmatch(r"`[^`]*`", value), f"{what} {value!r} is not in backquotes"
    return ["" if v == '`""`' else v[1:-1] for v in values]


def table_rows(text: str) -> list[Row]:
    """The rows between the markers of docs/deploy.md's RBAC section, checked for form."""
    assert text.count(BEGIN) == 1 and text.count(END) == 1, "the rule table's markers"
    body = text.split(BEGIN, 1)[1].split(END, 1)[0].strip().splitlines()
    assert _cells(body[0]) == HEADER
    assert set(_cells(body[1])) == {"---"}
    rows = []
    for line in body[2:]:
        group, resource, verbs, scope, names, code_path = _cells(line)
        (group,) = _quoted(group, "group")
        (resource,) = _quoted(resource, "resource")
        assert scope in (CLUSTER, RELEASE_NAMESPACE), f"scope {scope!r}: {line}"
        assert _CODE.search(code_path), f"no `omed.<module>.<function>` code path: {line}"
        rows.append(
            Row(
                group=group,
                resource=resource,
                verbs=frozenset(_quoted(verbs, "verb")),
                scope=scope,
                names=() if names == "any" else tuple(_quoted(names, "resource name")),
                code_path=code_path,
            )
        )
    return rows


def expected(rows: list[Row], *, release_namespace: bool) -> dict[Grant, frozenset[str]]:
    """What the table grants in a namespace: the cluster rows, and in the release namespace
    the Role's rows too; the verbs of rows of one grant are joined."""
    out: dict[Grant, frozenset[str]] = {}
    for row in rows:
        if row.scope == CLUSTER or release_namespace:
            for grant in row.grants():
                out[grant] = out.get(grant, frozenset()) | row.verbs
    return out


_LINE = re.compile(r"^(\S*)\s+\[([^\]]*)\]\s+\[([^\]]*)\]\s+\[([^\]]*)\]\s*$")


@dataclass(frozen=True)
class Answer:
    resources: dict[Grant, frozenset[str]]
    non_resource: dict[str, frozenset[str]]
    text: str


def parse_can_i(text: str) -> Answer:
    """``kubectl auth can-i --list`` as printed: ``resource.group/subresource``, then the
    non-resource URLs, resource names and verbs as ``[a b]`` lists, one row per resource and
    name (kubectl breaks the rules down, then joins the verbs of one resource and name)."""
    lines = text.strip().splitlines()
    assert lines[0].split() == ["Resources", "Non-Resource", "URLs", "Resource", "Names", "Verbs"]
    resources: dict[Grant, frozenset[str]] = {}
    non_resource: dict[str, frozenset[str]] = {}
    for line in lines[1:]:
        match = _LINE.match(line)
        assert match, f"unexpected line {line!r} in:\n{text}"
        combined, urls, names, verbs = (match.group(i) for i in range(1, 5))
        verb_set = frozenset(verbs.split())
        if urls:
            assert not combined and not names, line
            for url in urls.split():
                non_resource[url] = non_resource.get(url, frozenset()) | verb_set
            continue
        resource, _, subresource = combined.partition("/")
        plural, _, group = resource.partition(".")
        full = f"{plural}/{subresource}" if subresource else plural
        for name in names.split() or [""]:
            grant = (group, full, name)
            resources[grant] = resources.get(grant, frozenset()) | verb_set
    return Answer(resources, non_resource, text)


def _can_i(install: Any, namespace: str) -> str:
    plane = install.plane
    result = subprocess.run(
        [
            str(plane.binaries.kubectl),
            "--kubeconfig",
            str(plane.kubeconfig_path),
            "auth",
            "can-i",
            "--list",
            f"--as={install.user}",
            "--namespace",
            namespace,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


async def answer_with(install: Any, namespace: str, want: Mapping[Grant, frozenset[str]]) -> Answer:
    """kubectl's answer once it includes every grant of ``want``: the RBAC authorizer reads
    new roles through its informers, so a fresh install shows up a moment later."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + RBAC_TIMEOUT
    while True:
        answer = parse_can_i(await asyncio.to_thread(_can_i, install, namespace))
        if all(verbs <= answer.resources.get(grant, frozenset()) for grant, verbs in want.items()):
            return answer
        assert loop.time() < deadline, (
            f"the RBAC authorizer didn't grant the table within {RBAC_TIMEOUT}s:\n{answer.text}"
        )
        await asyncio.sleep(0.5)


def differences(answer: Answer, want: Mapping[Grant, frozenset[str]]) -> list[str]:
    """Every grant that differs from the table once the default grants are filtered out."""
    wrong = []
    for grant, verbs in sorted(answer.resources.items()):
        if DEFAULT_RESOURCE_GRANTS.get(grant) == verbs and grant not in want:
            continue
        if grant not in want:
            wrong.append(f"granted beyond the table: {grant} {sorted(verbs)}")
        elif verbs != want[grant]:
            wrong.append(f"{grant}: granted {sorted(verbs)}, the table says {sorted(want[grant])}")
    wrong += [
        f"missing: {g} {sorted(v)}" for g, v in sorted(want.items()) if g not in answer.resources
    ]
    for url, verbs in sorted(answer.non_resource.items()):
        if url not in DEFAULT_NON_RESOURCE_URLS or verbs != {"get"}:
            wrong.append(f"non-resource URL beyond the defaults: {url} {sorted(verbs)}")
    return wrong


@pytest.fixture(scope="module")
def chart_installed(control_plane: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The ome-resources chart installed with helm into ``ome`` (Deployment at 0 replicas);
    uninstalled at teardown, since its webhook configurations are cluster-wide."""
    from omed_devcluster.install import OmeInstall

    install = OmeInstall(control_plane, workdir=tmp_path_factory.mktemp("rbac-table"))
    try:
        install.install()
        yield install
    finally:
        install.uninstall()


def test_the_table_is_well_formed() -> None:
    rows = table_rows(DOC.read_text(encoding="utf-8"))
    seen: dict[tuple[Grant, str, str], int] = {}
    for number, row in enumerate(rows):
        assert row.verbs, row
        for grant in row.grants():
            for verb in row.verbs:
                key = (grant, row.scope, verb)
                assert key not in seen, f"rows {seen.get(key)} and {number} both grant {key}"
                seen[key] = number
    assert {r.scope for r in rows} == {CLUSTER, RELEASE_NAMESPACE}


async def test_release_namespace_grants_exactly_the_table(chart_installed: Any) -> None:
    install = chart_installed
    assert install.namespace == "ome"  # the table's "namespace ome"
    want = expected(table_rows(DOC.read_text(encoding="utf-8")), release_namespace=True)
    answer = await answer_with(install, install.namespace, want)
    assert DEFAULT_RESOURCE_GRANTS.items() <= answer.resources.items(), answer.text
    wrong = differences(answer, want)
    assert not wrong, "\n".join(wrong) + f"\n\nkubectl auth can-i --list:\n{answer.text}"


async def test_other_namespace_grants_only_the_cluster_rows(
    chart_installed: Any, namespace: str
) -> None:
    install = chart_installed
    rows = table_rows(DOC.read_text(encoding="utf-8"))
    want = expected(rows, release_namespace=False)
    answer = await answer_with(install, namespace, want)
    wrong = differences(answer, want)
    assert not wrong, "\n".join(wrong) + f"\n\nkubectl auth can-i --list:\n{answer.text}"
    role_only = set(expected(rows, release_namespace=True)) - set(want)
    assert role_only, "the Role's rows (leases, the ConfigMap) must be namespaced"
    assert not role_only & set(answer.resources)


def test_parse_can_i_reads_kubectl_rows() -> None:
    text = "\n".join(
        [
            "Resources                            Non-Resource URLs  Resource Names  Verbs",
            "pods/status                          []                 []              [patch]",
            "inferenceservices.ome.io/finalizers  []                 []              [update]",
            "leases.coordination.k8s.io           []                 [lock]          [get update]",
            "                                     [/api/*]           []              [get]",
        ]
    )
    answer = parse_can_i(text)
    assert answer.resources == {
        ("", "pods/status", ""): {"patch"},
        ("ome.io", "inferenceservices/finalizers", ""): {"update"},
        ("coordination.k8s.io", "leases", "lock"): {"get", "update"},
    }
    assert answer.non_resource == {"/api/*": {"get"}}


def test_every_code_path_of_the_table_exists() -> None:
    """The dotted names of the code path column resolve: a module, then attributes in it."""
    missing = []
    for row in table_rows(DOC.read_text(encoding="utf-8")):
        for dotted in _CODE.findall(row.code_path):
            if not _resolves(dotted):
                missing.append(f"{row.resource} {sorted(row.verbs)}: {dotted}")
    assert not missing, "\n".join(missing)


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[split:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False
