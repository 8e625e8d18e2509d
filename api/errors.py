"""Errors the api answers with, and the one handler that turns them into JSON."""

from __future__ import annotations

import logging

import redis
from flask import Flask, jsonify, request
from werkzeug.exceptions import HTTPException

from api.launcher import LaunchError
from core.retention import REDIS_FULL, REDIS_FULL_RETRY_AFTER_SECONDS
from core.workflow_store import ActivationError, VersionConflict, WorkflowNotFound
from engine.errors import EngineError

log = logging.getLogger("mini_n8n.api")

# How soon a client may try again when Redis or the broker is unreachable: a restart takes seconds.
REDIS_RETRY_AFTER_SECONDS = 5


class ApiError(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def register_error_handlers(app: Flask) -> None:
    @app.errorhandler(ApiError)
    def _api_error(err: ApiError):
        response = jsonify({"message": err.message})
        response.status_code = err.status
        response.headers.update(err.headers)
        return response

    @app.errorhandler(LaunchError)
    def _launch(err):
        if isinstance(err.__cause__, redis.OutOfMemoryError):
            return _redis_full(err.__cause__)
        response = jsonify({"message": str(err)})
        response.status_code = 503
        response.headers["Retry-After"] = str(REDIS_RETRY_AFTER_SECONDS)
        return response

    @app.errorhandler(redis.OutOfMemoryError)
    def _redis_full(err):
        # Redis refuses writes (maxmemory, noeviction): what was refused changed nothing.
        log.warning("%s %s: Redis is full: %s", request.method, request.path, err)
        response = jsonify({"message": REDIS_FULL})
        response.status_code = 503
        response.headers["Retry-After"] = str(REDIS_FULL_RETRY_AFTER_SECONDS)
        return response

    @app.errorhandler(WorkflowNotFound)
    def _not_found(err):
        return jsonify({"message": f"workflow {err} not found"}), 404

    @app.errorhandler(ActivationError)
    def _activation(err):
        return jsonify({"message": str(err)}), 409

    @app.errorhandler(VersionConflict)
    def _conflict(err):
        message = (
            f"workflow {err} was changed since this version was loaded (in another tab?): "
            "reload it to see the saved version"
        )
        return jsonify({"message": message, "code": "versionConflict"}), 409

    @app.errorhandler(EngineError)
    def _engine(err):
        return jsonify({"message": str(err), "node": err.node}), 400

    @app.errorhandler(HTTPException)
    def _http(err: HTTPException):
        response = jsonify({"message": err.description or err.name})
        response.status_code = err.code or 500
        return response

    @app.errorhandler(redis.ConnectionError)
    @app.errorhandler(redis.TimeoutError)
    def _redis_unreachable(err):
        # Nothing was started: every handler talks to Redis before it launches anything.
        log.warning("%s %s: Redis is unreachable: %s", request.method, request.path, err)
        response = jsonify({"message": "Redis is unreachable; try again shortly"})
        response.status_code = 503
        response.headers["Retry-After"] = str(REDIS_RETRY_AFTER_SECONDS)
        return response

    @app.errorhandler(Exception)
    def _unexpected(err: Exception):
        # A bug: the traceback goes to the log, the client gets JSON without internals.
        log.exception("%s %s failed", request.method, request.path)
        return jsonify({"message": "Internal server error"}), 500
