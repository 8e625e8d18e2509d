"""One log line per request: method, path, status, duration in ms, and the execution it started.

The line is written when the server closes the response (werkzeug's `call_on_close`), so a
streamed chat answer or an editor push stream is logged once, when it ends, with its whole
duration. From the moment the response carries `X-Execution-Id` until then, that execution is
current (core/logs.py): every line logged while the response streams carries its id too.

Never the query string: the editor's push URL carries the API key as `?key=`. Probes and
scrapes (/healthz, /readyz, /metrics) are logged at DEBUG so they do not bury the traffic.
"""

from __future__ import annotations

import logging
import time

from flask import Flask, Response, g, request

from core.logs import reset_execution, set_execution

log = logging.getLogger("mini_n8n.access")

QUIET_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


def register(app: Flask) -> None:
    """Before every other before_request handler, so the duration counts them too."""
    app.before_request_funcs.setdefault(None, []).insert(0, _start)
    app.after_request(_finish)


def _start() -> None:
    g.access_started = time.perf_counter()


def _finish(response: Response) -> Response:
    started = g.get("access_started", time.perf_counter())
    method, path = request.method, request.path  # request.path has no query string
    execution_id = response.headers.get("X-Execution-Id") or None
    token = set_execution(execution_id) if execution_id else None
    status = response.status_code  # not the response: a stream lets go of its parts

    def write() -> None:
        try:
            _write(method, path, status, started, execution_id)
        finally:
            if token is not None:
                reset_execution(token)

    response.call_on_close(write)
    return response


def _write(method: str, path: str, status: int, started: float, execution_id: str | None) -> None:
    duration_ms = round((time.perf_counter() - started) * 1000, 1)
    level = logging.DEBUG if path in QUIET_PATHS else logging.INFO
    fields = {"method": method, "path": path, "status": status, "duration_ms": duration_ms}
    log.log(
        level,
        "%s %s %d %.0f ms",
        method,
        path,
        status,
        duration_ms,
        extra={"fields": fields, "execution_id": execution_id},
    )
