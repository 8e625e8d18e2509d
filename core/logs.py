"""Log lines for every process (api, worker, `up`): one format, and the execution they are about.

Every line logged while an execution is current carries its id (DESIGN.md section 4, Ops):
`execution(id)` makes it current for a block, a worker's task or an api response that started
one, and `ExecutionIdFilter` copies it onto each record as `execution_id`. A record that names
its execution itself (`extra={"execution_id": ...}`) keeps its own.

Two formats, chosen by MINI_N8N_LOG_FORMAT (Settings.log_format):
  text  2025-06-01 12:00:00,123 [4242] INFO mini_n8n.access [execution 5f1c…] POST /webhook/… 200 153 ms
  json  {"time":"2025-06-01T12:00:00.123Z","level":"INFO","logger":"mini_n8n.access","pid":4242,
         "message":"POST /webhook/… 200 153 ms","execution_id":"5f1c…","method":"POST",…}
Structured fields a line adds (`extra={"fields": {...}}`, the access line's method, path, status,
duration_ms) are keys of the JSON object; in text they are already in the message.
The level comes from MINI_N8N_LOG_LEVEL (default INFO). Lines go to stderr.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Iterable, Iterator
from contextvars import ContextVar, Token
from typing import Any

LEVEL_ENV = "MINI_N8N_LOG_LEVEL"
FORMATS = ("text", "json")

# Per greenlet or thread: gevent gives each greenlet its own context, so concurrent executions
# in one process never see each other's id.
current_execution: ContextVar[str | None] = ContextVar("mini_n8n_execution_id", default=None)


def set_execution(execution_id: str | None) -> Token[str | None]:
    """Make `execution_id` current until `reset_execution(token)`, for spans that are not a
    block (an api response that ends when the server closes it)."""
    return current_execution.set(execution_id)


def reset_execution(token: Token[str | None]) -> None:
    try:
        current_execution.reset(token)
    except ValueError:  # closed from another context than the one that set it
        current_execution.set(None)


@contextlib.contextmanager
def execution(execution_id: str | None) -> Iterator[None]:
    token = set_execution(execution_id)
    try:
        yield
    finally:
        reset_execution(token)


class ExecutionIdFilter(logging.Filter):
    """Adds `execution_id` (None outside an execution) to every record it sees. On a handler,
    so records of every logger that reaches the handler get it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "execution_id", None) is None:
            record.execution_id = current_execution.get()
        return True


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__(
            "%(asctime)s [%(process)d] %(levelname)s %(name)s %(execution)s%(message)s"
        )

    def format(self, record: logging.LogRecord) -> str:
        execution_id = getattr(record, "execution_id", None)
        record.execution = f"[execution {execution_id}] " if execution_id else ""
        return super().format(record)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: newlines in a message or traceback are escaped, so a log
    shipper never splits a record."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": _utc(record.created),
            "level": record.levelname,
            "logger": record.name,
            "pid": record.process,
            "message": record.getMessage(),
        }
        execution_id = getattr(record, "execution_id", None)
        if execution_id:
            line["execution_id"] = execution_id
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            line.update({k: v for k, v in fields.items() if k not in line})
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False, separators=(",", ":"), default=str)


def _utc(created: float) -> str:
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created))
    return f"{seconds}.{int(created % 1 * 1000):03d}Z"


def formatter(fmt: str) -> logging.Formatter:
    if fmt not in FORMATS:
        raise ValueError(f"MINI_N8N_LOG_FORMAT must be one of {', '.join(FORMATS)}, not {fmt!r}")
    return JsonFormatter() if fmt == "json" else TextFormatter()


def env_level(default: str = "INFO") -> str:
    return (os.environ.get(LEVEL_ENV) or default).upper()


def lean_records() -> None:
    """Records without what neither format writes: the source file and line (found by walking
    the caller's stack for every record, deep under gevent and Celery), the thread and the
    multiprocessing names. The logging module's own switches for it ("Optimization" in its
    HOWTO); the process id stays."""
    logging._srcfile = None
    logging.logThreads = False
    logging.logMultiprocessing = False


def configure(
    fmt: str = "text", level: str | int | None = None, filters: Iterable[logging.Filter] = ()
) -> logging.Handler:
    """The process's logging: one stderr handler on the root logger, in `fmt`, at `level`
    (default MINI_N8N_LOG_LEVEL). Calling it again replaces the handler it installed."""
    lean_records()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(fmt))
    handler.addFilter(ExecutionIdFilter())
    for extra in filters:
        handler.addFilter(extra)
    handler._mini_n8n = True  # type: ignore[attr-defined]
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_mini_n8n", False)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level or env_level())
    logging.captureWarnings(True)  # warnings become records, in the same format
    return handler


def dict_config(fmt: str = "text", level: str | None = None) -> dict[str, Any]:
    """The same setup as a logging.dictConfig mapping, for gunicorn's `logconfig_dict`: its
    error log writes through our handler, and its access log is off (a logconfig turns it on):
    its lines carry the query string, and the api writes its own (api/access_log.py)."""
    formatter(fmt)  # an unknown format fails here, at start, not on the first line
    lean_records()
    level = level or env_level()
    formatter_class = "JsonFormatter" if fmt == "json" else "TextFormatter"
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"mini_n8n": {"()": f"{__name__}.{formatter_class}"}},
        "filters": {"execution": {"()": f"{__name__}.ExecutionIdFilter"}},
        "handlers": {
            "mini_n8n": {
                "class": "logging.StreamHandler",
                "stream": "ext://sys.stderr",
                "formatter": "mini_n8n",
                "filters": ["execution"],
            }
        },
        "root": {"level": level, "handlers": ["mini_n8n"]},
        "loggers": {
            "gunicorn.error": {"level": level, "handlers": [], "propagate": True},
            "gunicorn.access": {"level": "CRITICAL", "handlers": [], "propagate": False},
        },
    }
