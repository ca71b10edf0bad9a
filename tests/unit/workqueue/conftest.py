from __future__ import annotations

import itertools

import pytest

_names = itertools.count()


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> str:
    """A metrics name no other test uses (metric series live for the whole process)."""
    return f"{request.node.name.split('[')[0]}-{next(_names)}"
