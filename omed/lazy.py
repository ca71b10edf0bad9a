"""Names and packages imported on first use (PEP 562 module ``__getattr__``).

:func:`exports` is for omed's own packages, :func:`defer_package` for installed ones.

Why: a package ``__init__`` that imported every module it re-exports would make importing
one light module of the package build all the rest (``kubectl ome`` reads
:mod:`omed.api.constants` without building a pydantic model). Such a package lists each name
with the module it comes from, and takes its ``__getattr__`` from :func:`exports`.

Invariant: a name is imported once; after its first read it is in the package's globals, so
later reads never reach ``__getattr__``. An unlisted name is an ``AttributeError``, as for any
module.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any


def exports(
    package: str, where: Mapping[str, str], namespace: dict[str, Any]
) -> Callable[[str], object]:
    """The ``__getattr__`` of ``package``: a name of ``where`` is read from its module and kept
    in ``namespace`` (the package's ``globals()``)."""

    def __getattr__(name: str) -> object:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        from importlib import import_module

        value = getattr(import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__


_LOCK = threading.RLock()
_NO_NAMES: Mapping[str, str] = {}


def defer_package(name: str, narrow: Mapping[str, str] = _NO_NAMES) -> None:
    """Register the installed package ``name`` as *deferred*, unless it is imported already.

    Why: a library's ``__init__`` often imports all its modules (prometheus_client's its HTTP
    exposition server, kubernetes-asyncio's its whole generated client), where a process
    needs one or two of them. A deferred package is the real package (its own spec and
    ``__path__``, so its submodules import as usual) whose ``__init__`` runs the first time
    a name it doesn't have yet is read from it. ``narrow`` maps names to the submodule that
    holds them (a name equal to its submodule's is that submodule): those are read from the
    submodule without running ``__init__``.

    Invariants: nothing changes for code that uses the package as documented: any other name
    (``from package import anything``, ``package.anything``) first runs ``__init__``, once,
    and the objects are the same either way; a package imported before this call, or not
    installed as a package, is left to the ordinary import.
    """
    if name in sys.modules:
        return
    with _LOCK:
        if name in sys.modules:
            return
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or spec.submodule_search_locations is None:
            return
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
