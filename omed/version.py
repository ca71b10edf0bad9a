"""The one source of omed's version: the installed distribution's metadata.

`omed --version`, `kubectl ome version` and the build-info metric all read `VERSION`, so the
three can never disagree; pyproject.toml's `version` is what the metadata carries.
"""

from __future__ import annotations

from importlib import metadata

DISTRIBUTION = "omed"


def _installed_version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        # Run from a source tree that was never installed: say so rather than guess.
        return "0.0.0+unknown"


VERSION = _installed_version()
