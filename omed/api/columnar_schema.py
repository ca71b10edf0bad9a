"""OpenAPI v3 schema of ``status.instanceStatusColumns`` (the ColumnarV2 form).

Placeholder until the ColumnarV2 codec lands: owned by the statuscodec work, consumed by the
CRD generator.
"""

from __future__ import annotations

from typing import Any

COLUMNAR_V2_SCHEMA: dict[str, Any] = {
    "type": "object",
    "x-kubernetes-preserve-unknown-fields": True,
}
