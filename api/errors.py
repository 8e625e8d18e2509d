"""Errors the api answers with, and the one handler that turns them into JSON."""

from __future__ import annotations

from flask import Flask, jsonify
from werkzeug.exceptions import HTTPException

from api.launcher import LaunchError
from api.workflow_store import ActivationError, WorkflowNotFound
from engine.errors import EngineError


class ApiError(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None, **extra):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}
        self.extra = extra


def register_error_handlers(app: Flask) -> None:
    @app.errorhandler(ApiError)
    def _api_error(err: ApiError):
        response = jsonify({"message": err.message, **err.extra})
        response.status_code = err.status
        response.headers.update(err.headers)
        return response

    @app.errorhandler(LaunchError)
    def _launch(err):
        return jsonify({"message": str(err)}), 503

    @app.errorhandler(WorkflowNotFound)
    def _not_found(err):
        return jsonify({"message": f"workflow {err} not found"}), 404

    @app.errorhandler(ActivationError)
    def _activation(err):
        return jsonify({"message": str(err)}), 409

    @app.errorhandler(EngineError)
    def _engine(err):
        return jsonify({"message": str(err), "node": err.node}), 400

    @app.errorhandler(HTTPException)
    def _http(err: HTTPException):
        response = jsonify({"message": err.description or err.name})
        response.status_code = err.code or 500
        return response
