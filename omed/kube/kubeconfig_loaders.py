"""kubernetes-asyncio's kubeconfig and in-cluster loaders, without its generated client.

omed loads the kubeconfig (or the in-cluster config) and its auth through
kubernetes-asyncio's loaders, and sends every request itself (:mod:`omed.kube.client`).
Those loaders are a few small modules, but importing any of them runs the package's
``__init__``, which imports the whole generated client: about 140 API classes and 1,500
models, more than a second of CPU, ten times the reads of ``kubectl ome instance list``.

So, before importing the loaders, this module registers three of the library's packages
(``kubernetes_asyncio``, ``kubernetes_asyncio.client``, ``kubernetes_asyncio.client.models``),
and urllib3, as *deferred* (:func:`omed.lazy.defer_package`): each is the real package (its
own spec and ``__path__``, so its submodules import as usual) whose ``__init__`` runs the
first time a name it doesn't have yet is read from it. The loaders import ``Configuration``,
``ApiClient`` and ``rest`` from the client package; those three come straight from their
submodules (``configuration``, ``api_client``, ``rest``), and the models package they import
is deferred in turn.

Invariants:
- nothing changes for code that uses the library as documented: any other name read from a
  deferred package (``client.CoreV1Api``, ``client.V1Pod``, ``kubernetes_asyncio.watch``...)
  first runs that package's ``__init__``, once (none of the three needs its parent's run
  first); the classes are the same objects either way;
- a package already imported when this module is is left as it is (a process that imported
  the library first gets the loaders from it);
- the loaders' import reads nothing else of the generated client
  (tests/unit/kube/test_kubeconfig_loaders.py checks, in a fresh interpreter, that no model
  or API module is imported).

This leans on the library's layout (which module holds which name), like the loaders'
internals omed reads already; pyproject.toml bounds kubernetes-asyncio for both.
"""

from __future__ import annotations

from omed.lazy import defer_package

_PACKAGE = "kubernetes_asyncio"


def _deferred_imports() -> None:
    defer_package(_PACKAGE)
    defer_package(
        f"{_PACKAGE}.client",
        {"Configuration": "configuration", "ApiClient": "api_client", "rest": "rest"},
    )
    defer_package(f"{_PACKAGE}.client.models")
    # The client's Configuration imports urllib3 for one method (basic auth's header):
    # urllib3's __init__ (its connection pools and their TLS) runs when that is called.
    defer_package("urllib3")


_deferred_imports()

from kubernetes_asyncio.client.configuration import Configuration  # noqa: E402
from kubernetes_asyncio.config import incluster_config  # noqa: E402
from kubernetes_asyncio.config.exec_provider import ExecProvider  # noqa: E402
from kubernetes_asyncio.config.kube_config import (  # noqa: E402
    KubeConfigLoader,
    KubeConfigMerger,
    list_kube_config_contexts,
)

__all__ = [
    "Configuration",
    "ExecProvider",
    "KubeConfigLoader",
    "KubeConfigMerger",
    "incluster_config",
    "list_kube_config_contexts",
]
