"""The Flask app factory. Nothing is built at import time."""

from __future__ import annotations

import logging
from typing import Any

from flask import Flask

from api import errors, ops, webhooks
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
    app.extensions["mini_n8n"] = ApiRuntime(settings)
    errors.register_error_handlers(app)
    app.register_blueprint(ops.bp)
    app.register_blueprint(webhooks.bp)
    _import_workflows(app, settings)
    return app


def _import_workflows(app: Flask, settings: Settings) -> None:
    if not settings.workflows_dir:
        return
    from mini_n8n.importer import import_directory

    rt = app.extensions["mini_n8n"]
    for line in import_directory(rt.workflows, settings.workflows_dir, activate=True):
        logging.getLogger("mini_n8n.api").info(line)
