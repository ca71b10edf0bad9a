"""DenseV1 <-> ColumnarV2: the two ways an InferenceReplica stores its per-Instance rows.

DenseV1 is the list ``status.instanceStatuses``, one JSON object per Instance. ColumnarV2 is
``status.instanceStatusColumns``, the same rows stored as a class table and per-row runs, which
shrinks a large, mostly uniform fleet by orders of magnitude (a 20,000-Instance fleet fits in a
few KiB instead of megabytes). docs/status-encoding.md specifies the format and the rules.

The codec is pure: plain JSON dicts in, plain JSON dicts out, no I/O. Its invariants:

* ``decode_columnar(encode_columnar(rows), max_rows=len(rows)) == rows`` for valid rows
  (absent keys stay absent, nested values exact);
* the decoders raise :class:`DecodeError` (with a :data:`DecodeReason`) and nothing else, on
  any input, and bound their work by ``max_rows`` (rows) and :func:`cell_bound` (rows x
  cells) before they allocate.
"""

from omed.statuscodec.cells import CELLS_PER_ROW, cell_bound
from omed.statuscodec.classtable import ClassTable
from omed.statuscodec.decoder import decode_class_table, decode_columnar
from omed.statuscodec.encoder import Encoded, RowCells, check_rows, encode, encode_columnar
from omed.statuscodec.errors import DECODE_REASONS, DecodeError, DecodeReason, EncodeError
from omed.statuscodec.messages import (
    REASON_CONVERTED,
    REASON_DECODE_FAILED,
    REASON_SIZE_EXCEEDED,
    converted_message,
    decode_failed_message,
    size_exceeded_message,
)
from omed.statuscodec.rowschema import MAX_LIST_ITEMS
from omed.statuscodec.status import (
    CLI_MAX_ROWS,
    COLUMNAR_V2,
    DENSE_V1,
    ENCODINGS,
    GUARDED_ACTION_MAX_ROWS,
    METRIC_LABEL_COLUMNAR_V2,
    METRIC_LABEL_DENSE_V1,
    METRIC_LABELS,
    Encoding,
    choose_encoding,
    conversion,
    decode_status,
    decode_status_table,
    encoded_size,
    status_merge_patch,
    stored_encoding,
    validate_rows,
    with_rows,
)

__all__ = [
    "CELLS_PER_ROW",
    "CLI_MAX_ROWS",
    "COLUMNAR_V2",
    "DECODE_REASONS",
    "DENSE_V1",
    "ENCODINGS",
    "GUARDED_ACTION_MAX_ROWS",
    "MAX_LIST_ITEMS",
    "METRIC_LABELS",
    "METRIC_LABEL_COLUMNAR_V2",
    "METRIC_LABEL_DENSE_V1",
    "REASON_CONVERTED",
    "REASON_DECODE_FAILED",
    "REASON_SIZE_EXCEEDED",
    "ClassTable",
    "DecodeError",
    "DecodeReason",
    "EncodeError",
    "Encoded",
    "Encoding",
    "RowCells",
    "cell_bound",
    "check_rows",
    "choose_encoding",
    "conversion",
    "converted_message",
    "decode_class_table",
    "decode_columnar",
    "decode_failed_message",
    "decode_status",
    "decode_status_table",
    "encode",
    "encode_columnar",
    "encoded_size",
    "size_exceeded_message",
    "status_merge_patch",
    "stored_encoding",
    "validate_rows",
    "with_rows",
]
