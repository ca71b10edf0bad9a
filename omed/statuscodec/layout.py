"""Names and limits of the ColumnarV2 envelope, shared by its encoder, decoder and schema.

ColumnarV2 stores a fleet's rows as a small *class table* (the distinct rows, without their
``index``), stored column by column, plus two per-row sequences: each row's ``index`` and its
class. See docs/status-encoding.md for the full format; this module only names its parts.
"""

from __future__ import annotations

from typing import Final

FORMAT_VERSION: Final = 2

KEY_VERSION: Final = "version"
KEY_ROW_COUNT: Final = "rowCount"
KEY_CLASS_COUNT: Final = "classCount"
KEY_STRINGS: Final = "strings"
KEY_TIMES: Final = "times"
KEY_INDEX: Final = "index"
KEY_ROW_CLASS: Final = "rowClass"
KEY_OVERRIDES: Final = "overrides"
KEY_COLUMNS: Final = "columns"

ENVELOPE_KEYS: Final = frozenset(
    {
        KEY_VERSION,
        KEY_ROW_COUNT,
        KEY_CLASS_COUNT,
        KEY_STRINGS,
        KEY_TIMES,
        KEY_INDEX,
        KEY_ROW_CLASS,
        KEY_OVERRIDES,
        KEY_COLUMNS,
    }
)

OVERRIDE_GAP: Final = 8
"""The longest stretch of rows the encoder lifts out of ``rowClass`` into ``overrides`` when the
same class surrounds it: a replaced Instance in a batch costs one position, not two runs."""
