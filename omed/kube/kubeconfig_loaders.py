"""kubernetes-asyncio's kubeconfig and in-cluster loaders, without its generated client.

omed loads the kubeconfig (or the in-cluster config) and its auth through
kubernetes-asyncio's loaders, and sends every request itself (:mod:`omed.kube.client`).
Those loaders are a few small modules, but importing any of them runs the package's
``__init__``, which imports the whole generated client: about 140 API classes and 1,500
models, more than a second of CPU, ten times the reads of ``kubectl ome instance list``.

So, before importing the loaders, this module registers three of the library's packages
(``kubernetes_asyncio``, ``kubernetes_asyncio.client``, ``kubernetes_asyncio.client.models``)
as *deferred*: each is the real package (its own spec and ``__path__``, so its submodules
import as usual) whose ``__init__`` runs the first time a name it doesn't have yet is read
from it. The loaders import ``Configuration``, ``ApiClient`` and ``rest`` from the client
package; those three come straight from their submodules (``configuration``, ``api_client``,
``rest``), and the models package they import is deferred in turn.

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

import importlib
import importlib.util
import sys
import threading
from collections.abc import Mapping
from typing import Any

_PACKAGE = "kubernetes_asyncio"
_LOCK = threading.RLock()
_NO_NAMES: Mapping[str, str] = {}


def _defer(name: str, narrow: Mapping[str, str] = _NO_NAMES) -> None:
    """Register the package ``name`` as deferred (see the module's docstring) unless it is
    imported already. ``narrow`` maps names to the submodule that holds them (a name equal
    to its submodule's is that submodule): those are read without running ``__init__``."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return  # not a package as expected: let the ordinary import do what it does
    loader = spec.loader
    module = importlib.util.module_from_spec(spec)

    def __getattr__(attr: str) -> Any:  # PEP 562: only names the module doesn't have yet
        where = narrow.get(attr)
        if where is not None:
            sub = importlib.import_module(f"{name}.{where}")
            return sub if where == attr else getattr(sub, attr)
        with _LOCK:
            if module.__dict__.pop("__getattr__", None) is not None:
                loader.exec_module(module)
        return getattr(module, attr)

    module.__dict__["__getattr__"] = __getattr__
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)


def _deferred_imports() -> None:
    with _LOCK:
        _defer(_PACKAGE)
        _defer(
            f"{_PACKAGE}.client",
            {"Configuration": "configuration", "ApiClient": "api_client", "rest": "rest"},
        )
        _defer(f"{_PACKAGE}.client.models")


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
