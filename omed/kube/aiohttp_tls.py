"""aiohttp's two default TLS contexts, their CA certificates loaded when a connection first
uses one, not when aiohttp is imported.

Why: importing ``aiohttp.connector`` builds a verified and an unverified default context,
and each loads the system's CA certificates: about 60 ms of CPU, a fifth of what
``kubectl ome instance list`` imports. omed hands aiohttp its own context (built from the
kubeconfig, :func:`omed.kube.client.tls_context`, unverified ones included), so its
connections use neither; a plain ``http://`` server uses no TLS at all. Installed by
:func:`omed.kube.defer_client_imports`, which only the plugin calls.

How: while the body of ``aiohttp.connector`` runs (in the importing thread only),
``SSLContext.load_default_certs`` and ``SSLContext.set_default_verify_paths`` record their
calls instead of making them; ``TCPConnector._get_ssl_context``, the one reader of those
contexts, makes a context's recorded calls before it hands that context out the first time.

Invariants:
- a context aiohttp hands to a connection has what it would have had, its CA certificates
  loaded as the same calls load them;
- when aiohttp's layout is not that one (no ``_get_ssl_context``, or a recorded context that
  is not one of its two defaults), or its connector module is imported before
  :func:`install`, the calls are made at once: the ordinary import;
- any other thread, or any context made after the import, calls the real methods.
"""

from __future__ import annotations

import functools
import importlib.machinery
import sys
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any

_MODULE = "aiohttp.connector"
_DEFAULTS = ("_SSL_CONTEXT_VERIFIED", "_SSL_CONTEXT_UNVERIFIED")
_RECORDED = ("load_default_certs", "set_default_verify_paths")
_LOCK = threading.Lock()
_pending: list[tuple[Any, list[tuple[str, tuple[Any, ...]]]]] = []
"""(context, its recorded calls) of the default contexts not handed out yet."""


def install() -> None:
    """Defer the CA loading of aiohttp's default contexts, unless its connector module is
    imported already (or is being found already)."""
    if _MODULE in sys.modules or any(isinstance(f, _Finder) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _Finder())


class _Finder:
    """A meta path finder (the protocol: ``find_spec``), not a subclass of
    ``importlib.abc.MetaPathFinder``: importing ``importlib.abc`` imports
    ``importlib.resources``, which nothing else ``kubectl ome`` runs needs."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != _MODULE:
            return None
        sys.meta_path.remove(self)  # once: the next finders find the module itself
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or type(spec.loader) is not importlib.machinery.SourceFileLoader:
            return spec
        spec.loader = _Loader(spec.loader.name, spec.loader.path)
        return spec


class _Loader(importlib.machinery.SourceFileLoader):
    def exec_module(self, module: ModuleType) -> None:
        import ssl

        recorded: dict[int, tuple[Any, list[tuple[str, tuple[Any, ...]]]]] = {}
        importing = threading.get_ident()
        saved = {name: ssl.SSLContext.__dict__.get(name) for name in _RECORDED}
        real = {name: getattr(ssl.SSLContext, name) for name in _RECORDED}

        def recorder(name: str) -> Any:
            def record(context: Any, *args: Any) -> None:
                if threading.get_ident() != importing:
                    real[name](context, *args)
                    return
                recorded.setdefault(id(context), (context, []))[1].append((name, args))

            return record

        for name in _RECORDED:
            setattr(ssl.SSLContext, name, recorder(name))
        try:
            super().exec_module(module)
        finally:
            for name, value in saved.items():
                if value is None:
                    delattr(ssl.SSLContext, name)
                else:
                    setattr(ssl.SSLContext, name, value)
        _defer(module, list(recorded.values()))


def _defer(
    module: ModuleType, recorded: list[tuple[Any, list[tuple[str, tuple[Any, ...]]]]]
) -> None:
    connector = getattr(module, "TCPConnector", None)
    original = getattr(connector, "_get_ssl_context", None)
    defaults = [getattr(module, name, None) for name in _DEFAULTS]
    if original is None or not all(any(context is d for d in defaults) for context, _ in recorded):
        for context, calls in recorded:
            _replay(context, calls)
        return
    _pending.extend(recorded)

    @functools.wraps(original)
    def _get_ssl_context(self: Any, req: Any) -> Any:
        context = original(self, req)
        if _pending and context is not None:
            _complete(context)
        return context

    connector._get_ssl_context = _get_ssl_context  # type: ignore[union-attr]


def _complete(context: Any) -> None:
    with _LOCK:
        for index, (pending, calls) in enumerate(_pending):
            if pending is context:
                del _pending[index]
                _replay(context, calls)
                return


def _replay(context: Any, calls: list[tuple[str, tuple[Any, ...]]]) -> None:
    for name, args in calls:
        getattr(context, name)(*args)
