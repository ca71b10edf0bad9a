"""Structured logs in zap's console or JSON form.

Users grep for exact log lines (``Waited before sending request``, ``OMENative scale-down
wave``, ``Failed to start manager`` ...), so every log call passes the
exact message as its first argument and the key-values separately: ``log.info("msg",
extra={"kv": {...}})`` or, shorter, :func:`kv`. The console form is
``<time>\t<LEVEL>\t<logger>\t<message>\t{"key": value}`` as controller-runtime's zap console
encoder prints it; the JSON form has ``ts``, ``level``, ``logger``, ``msg`` and the keys.
"""

from __future__ import annotations

import datetime as dt
import logging
import sys
from collections.abc import Mapping
from typing import Any

import orjson

_LEVEL_NAMES = {
    logging.DEBUG: "debug",
    logging.INFO: "info",
    logging.WARNING: "warn",
    logging.ERROR: "error",
    logging.CRITICAL: "panic",
}


def kv(**values: Any) -> dict[str, Any]:
    """Key-values for one log call: ``log.info("msg", extra=kv(key=value))``."""
    return {"kv": values}


def _fields(record: logging.LogRecord) -> Mapping[str, Any]:
    values = getattr(record, "kv", None)
    return values if isinstance(values, Mapping) else {}


def _default(value: Any) -> Any:
    return str(value)


class ConsoleFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ts = dt.datetime.fromtimestamp(record.created, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        level = _LEVEL_NAMES.get(record.levelno, record.levelname.lower()).upper()
        parts = [ts, level, record.name, record.getMessage()]
        fields = dict(_fields(record))
        if record.exc_info:
            fields["error"] = str(record.exc_info[1])
        if fields:
            parts.append(orjson.dumps(fields, default=_default).decode())
        line = "\t".join(parts)
        if record.exc_info and record.levelno >= logging.ERROR:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(),
            "level": _LEVEL_NAMES.get(record.levelno, record.levelname.lower()),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        doc.update(_fields(record))
        if record.exc_info:
            doc["error"] = str(record.exc_info[1])
            doc["stacktrace"] = self.formatException(record.exc_info)
        return orjson.dumps(doc, default=_default).decode()


def setup(*, encoder: str = "console", level: int = logging.INFO) -> None:
    """Install one stderr handler on the root logger with the chosen encoder."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JSONFormatter() if encoder == "json" else ConsoleFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
