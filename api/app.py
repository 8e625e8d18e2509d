"""The Flask app factory. Nothing is built at import time."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from flask import Flask, send_from_directory

from api import errors, ops, push, rest, webhooks
from api.runtime import ApiRuntime
from mini_n8n.settings import Settings


def create_app(config: dict[str, Any] | None = None, settings: Settings | None = None) -> Flask:
    settings = settings or Settings.from_env()
    app = Flask(__name__)
    app.config.update(MAX_CONTENT_LENGTH=settings.max_body_bytes, JSON_SORT_KEYS=False)
    app.json.sort_keys = False
    app.json.ensure_ascii = False
    if config:
        app.config.update(config)
    rt = app.extensions["mini_n8n"] = ApiRuntime(settings)
    app.before_request(rt.warm)
    errors.register_error_handlers(app)
    app.register_blueprint(ops.bp)
    app.register_blueprint(webhooks.bp)
    app.register_blueprint(rest.bp)
    app.register_blueprint(push.bp)
    app.add_url_rule("/", "editor", _editor)
    _import_workflows(app, settings)
    return app


def _editor():
    """The editor page; its modules and styles are static files under /static/editor/."""
    response = send_from_directory(Path(__file__).parent / "static" / "editor", "index.html")
    response.headers["Cache-Control"] = "no-cache"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


def _import_workflows(app: Flask, settings: Settings) -> None:
    if not settings.workflows_dir:
        return
    from mini_n8n.importer import import_directory

    rt = app.extensions["mini_n8n"]
    for line in import_directory(rt.workflows, settings.workflows_dir, activate=True):
        logging.getLogger("mini_n8n.api").info(line)
