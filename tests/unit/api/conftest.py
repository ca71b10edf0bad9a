"""Sample objects shared by the API tests (api_samples.py), as fixtures: fresh copies."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from api_samples import IREP, ISVC


@pytest.fixture
def isvc_document() -> dict[str, Any]:
    """An InferenceService as the API server returns it, upstream-only fields included."""
    return copy.deepcopy(ISVC)


@pytest.fixture
def irep_document() -> dict[str, Any]:
    """An InferenceReplica with every spec and status field set."""
    return copy.deepcopy(IREP)
