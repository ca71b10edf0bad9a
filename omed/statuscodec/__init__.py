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

from typing import TYPE_CHECKING

from omed.lazy import exports

if TYPE_CHECKING:
    from omed.statuscodec.cells import CELLS_PER_ROW, cell_bound
    from omed.statuscodec.classes import check_rows
    from omed.statuscodec.classtable import ClassTable
    from omed.statuscodec.decoder import decode_class_table, decode_columnar
    from omed.statuscodec.encoder import Encoded, RowCells, encode, encode_columnar
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
        decode_status,
        decode_status_table,
        encoded_size,
        stored_encoding,
        validate_rows,
    )
    from omed.statuscodec.writing import choose_encoding, conversion, status_merge_patch, with_rows

_WHERE: dict[str, str] = {
    "CELLS_PER_ROW": "omed.statuscodec.cells",
    "CLI_MAX_ROWS": "omed.statuscodec.status",
    "COLUMNAR_V2": "omed.statuscodec.status",
    "DECODE_REASONS": "omed.statuscodec.errors",
    "DENSE_V1": "omed.statuscodec.status",
    "ENCODINGS": "omed.statuscodec.status",
    "GUARDED_ACTION_MAX_ROWS": "omed.statuscodec.status",
    "MAX_LIST_ITEMS": "omed.statuscodec.rowschema",
    "METRIC_LABELS": "omed.statuscodec.status",
    "METRIC_LABEL_COLUMNAR_V2": "omed.statuscodec.status",
    "METRIC_LABEL_DENSE_V1": "omed.statuscodec.status",
    "REASON_CONVERTED": "omed.statuscodec.messages",
    "REASON_DECODE_FAILED": "omed.statuscodec.messages",
    "REASON_SIZE_EXCEEDED": "omed.statuscodec.messages",
    "ClassTable": "omed.statuscodec.classtable",
    "DecodeError": "omed.statuscodec.errors",
    "DecodeReason": "omed.statuscodec.errors",
    "EncodeError": "omed.statuscodec.errors",
    "Encoded": "omed.statuscodec.encoder",
    "Encoding": "omed.statuscodec.status",
    "RowCells": "omed.statuscodec.encoder",
    "cell_bound": "omed.statuscodec.cells",
    "check_rows": "omed.statuscodec.classes",
    "choose_encoding": "omed.statuscodec.writing",
    "conversion": "omed.statuscodec.writing",
    "converted_message": "omed.statuscodec.messages",
    "decode_class_table": "omed.statuscodec.decoder",
    "decode_columnar": "omed.statuscodec.decoder",
    "decode_failed_message": "omed.statuscodec.messages",
    "decode_status": "omed.statuscodec.status",
    "decode_status_table": "omed.statuscodec.status",
    "encode": "omed.statuscodec.encoder",
    "encode_columnar": "omed.statuscodec.encoder",
    "encoded_size": "omed.statuscodec.status",
    "size_exceeded_message": "omed.statuscodec.messages",
    "status_merge_patch": "omed.statuscodec.writing",
    "stored_encoding": "omed.statuscodec.status",
    "validate_rows": "omed.statuscodec.status",
    "with_rows": "omed.statuscodec.writing",
}
"""Each name of ``__all__`` and the module it comes from. They are imported on first use, so
that a reader of statuses (``kubectl ome``) imports the decoders without the encoder."""

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

__getattr__ = exports(__name__, _WHERE, globals())
