"""omed.lazy: a package's names imported on first read, kept after it."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from omed.lazy import exports


def test_a_name_is_imported_on_first_read_and_kept_in_the_package() -> None:
    namespace: dict[str, Any] = {}
    getattr_ = exports("pkg", {"dumps": "json", "sqrt": "math"}, namespace)

    assert getattr_("dumps") is sys.modules["json"].dumps
    assert namespace == {"dumps": sys.modules["json"].dumps}


def test_an_unlisted_name_is_an_attribute_error_naming_the_package() -> None:
    getattr_ = exports("pkg", {"dumps": "json"}, {})

    with pytest.raises(AttributeError, match="module 'pkg' has no attribute 'loads'"):
        getattr_("loads")


def test_the_api_package_builds_no_model_until_one_is_read() -> None:
    script = (
        "import sys\n"
        "import omed.api, omed.api.constants\n"
        "before = 'omed.api.inferencereplica' in sys.modules\n"
        "omed.api.InferenceReplica\n"
        "print(before, 'omed.api.inferencereplica' in sys.modules, 'InferenceReplica' in "
        "vars(omed.api))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "False True True"
