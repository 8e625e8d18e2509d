"""Errors the api answers with, and the one handler that turns them into JSON."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import redis
from flask import Flask, Response, jsonify, request
from werkzeug.exceptions import HTTPException

from api.launcher import LaunchError
from core.retention import REDIS_FULL, REDIS_FULL_RETRY_AFTER_SECONDS
from core.workflow_store import ActivationError, VersionConflict, WorkflowNotFound
from engine.errors import EngineError

log = logging.getLogger("mini_n8n.api")

# How soon a client may try again when Redis or the broker is unreachable: a restart takes seconds.
REDIS_RETRY_AFTER_SECONDS = 5


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        headers: dict[str, str] | None = None,
        text: bool = False,
    ):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}
        self.text = text  # answered as plain text, where n8n answers so (a login's refusal)


def register_error_handlers(app: Flask) -> None:
    """Every error a view may raise becomes a JSON answer `{"message": ...}` (or its text)."""
    for error, handler in _HANDLERS:
        app.register_error_handler(error, handler)


def response_for(err: Exception) -> Response:
    """The answer the app's handlers give `err` (its nearest class's handler), for a blueprint
    that reshapes it."""
    for cls in type(err).__mro__:
        for error, handler in _HANDLERS:
            if error is cls:
                return handler(err)
    return _unexpected(err)


def _answer(body: dict, status: int, retry_after: int | None = None, headers=None) -> Response:
    response = jsonify(body)
    response.status_code = status
    response.headers.update(headers or {})
    if retry_after is not None:
        response.headers["Retry-After"] = str(retry_after)
    return response


def _api_error(err: ApiError) -> Response:
    if err.text:
        response = Response(err.message, err.status, mimetype="text/plain")
        response.headers.update(err.headers)
        return response
    return _answer({"message": err.message}, err.status, headers=err.headers)


def _launch(err: LaunchError) -> Response:
    if isinstance(err.__cause__, redis.OutOfMemoryError):
        return _redis_full(err.__cause__)
    return _answer({"message": str(err)}, 503, REDIS_RETRY_AFTER_SECONDS)


def _redis_full(err: redis.OutOfMemoryError) -> Response:
    # Redis refuses writes (maxmemory, noeviction): what was refused changed nothing.
    log.warning("%s %s: Redis is full: %s", request.method, request.path, err)
    return _answer({"message": REDIS_FULL}, 503, REDIS_FULL_RETRY_AFTER_SECONDS)


def _not_found(err: WorkflowNotFound) -> Response:
    return _answer({"message": f"workflow {err} not found"}, 404)


def _activation(err: ActivationError) -> Response:
    return _answer({"message": str(err)}, 409)


def _conflict(err: VersionConflict) -> Response:
    message = (
        f"workflow {err} was changed since this version was loaded (in another tab?): "
        "reload it to see the saved version"
    )
    return _answer({"message": message, "code": "versionConflict"}, 409)


def _engine(err: EngineError) -> Response:
    return _answer({"message": str(err), "node": err.node}, 400)


def _http(err: HTTPException) -> Response:
    return _answer({"message": err.description or err.name}, err.code or 500)


def _redis_unreachable(err: redis.RedisError) -> Response:
    # Nothing was started: every handler talks to Redis before it launches anything.
    log.warning("%s %s: Redis is unreachable: %s", request.method, request.path, err)
    message = "Redis is unreachable; try again shortly"
    return _answer({"message": message}, 503, REDIS_RETRY_AFTER_SECONDS)


def _unexpected(err: Exception) -> Response:
    # A bug: the traceback goes to the log, the client gets JSON without internals.
    log.exception("%s %s failed", request.method, request.path)
    return _answer({"message": "Internal server error"}, 500)


# Flask picks the handler of the error's nearest class, whatever the order here.
_HANDLERS: list[tuple[type[Exception], Callable[[Any], Response]]] = [
    (ApiError, _api_error),
    (LaunchError, _launch),
    (redis.OutOfMemoryError, _redis_full),
    (WorkflowNotFound, _not_found),
    (ActivationError, _activation),
    (VersionConflict, _conflict),
    (EngineError, _engine),
    (HTTPException, _http),
    (redis.ConnectionError, _redis_unreachable),
    (redis.TimeoutError, _redis_unreachable),
    (Exception, _unexpected),
]
