"""A package's names imported on first use (PEP 562 module ``__getattr__``).

Why: a package ``__init__`` that imported every module it re-exports would make importing
one light module of the package build all the rest (``kubectl ome`` reads
:mod:`omed.api.constants` without building a pydantic model). Such a package lists each name
with the module it comes from, and takes its ``__getattr__`` from :func:`exports`.

Invariant: a name is imported once; after its first read it is in the package's globals, so
later reads never reach ``__getattr__``. An unlisted name is an ``AttributeError``, as for any
module.
"""

from __future__ import annotations

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
