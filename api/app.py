"""The Flask app factory. Nothing is built at import time."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import redis
from flask import Flask, Response, redirect, request, send_from_directory
from flask.json.provider import DefaultJSONProvider

from api import (
    access,
    access_log,
    bodies,
    chat_socket,
    errors,
    hub,
    ops,
    push,
    rest,
    waiting_webhook,
    webhooks,
)
from api.rest import auth, signin
from api.runtime import ApiRuntime
from api.wait_webhook import bp as resume_calls
from core.folder_import import import_folder
from core.jsontext import dumps
from core.settings import Settings

log = logging.getLogger("mini_n8n.api")

# The editor is our own static files: nothing inline, nothing from elsewhere, never in a frame.
EDITOR_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


class JSONProvider(DefaultJSONProvider):
    """jsonify writes what JSON.stringify would (core.jsontext): no NaN, no lone surrogates."""

    def dumps(self, obj, **kwargs) -> str:
        return dumps(obj, default=kwargs.get("default", self.default))


def create_app(config: dict[str, Any] | None = None, settings: Settings | None = None) -> Flask:
    settings = settings or Settings.from_env()
    app = Flask(__name__)
    app.json = JSONProvider(app)
    if config:
        app.config.update(config)
    rt = app.extensions["mini_n8n"] = ApiRuntime(settings)
    access_log.register(app)
    app.before_request(rt.warm)
    bodies.install(app, settings)  # every body in, under its door's limit, before its view runs
    app.after_request(_nosniff)
    errors.register_error_handlers(app)
    access.install(app)  # what each role may reach, before any blueprint's own checks
    app.register_blueprint(ops.bp)
    app.register_blueprint(webhooks.bp)
    app.register_blueprint(rest.bp)
    app.register_blueprint(signin.bp)
    app.register_blueprint(hub.bp)  # the Chat Hub, /rest/chat
    app.register_blueprint(push.bp)
    app.register_blueprint(waiting_webhook.bp)
    app.register_blueprint(resume_calls)  # a Wait node's resume URL
    chat_socket.register(app)
    app.add_url_rule("/", "editor", _editor)
    app.add_url_rule("/signin", "signin_page", _editor)  # the editor's sign-in, then ?redirect=
    app.add_url_rule(access.HUB_PATH, "hub", _hub)
    app.add_url_rule(f"{access.HUB_PATH}/<session_id>", "hub_conversation", _hub)  # n8n's too
    _import_workflows(app, settings)
    return app


def _editor():
    """The editor page; its modules and styles are static files under /static/editor/."""
    return _page("editor")


def _hub(session_id: str | None = None):
    """The Chat Hub's page (api/static/hub/), for signed-in people only: a signed-out browser
    is sent to sign in, and back here."""
    if auth.identify(navigation=True) is None:
        return redirect(f"/signin?redirect={quote(request.path)}")
    return _page("hub")


def _page(folder: str) -> Response:
    response = send_from_directory(Path(__file__).parent / "static" / folder, "index.html")
    response.headers["Cache-Control"] = "no-cache"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["Content-Security-Policy"] = EDITOR_CSP
    response.headers["X-Frame-Options"] = "DENY"
    return response


def _nosniff(response: Response) -> Response:
    # Every answer is read as the type it declares: JSON and NDJSON never as a script or page.
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    return response


def _import_workflows(app: Flask, settings: Settings) -> None:
    """Import and activate the bundled examples (only with MINI_N8N_DEMO) and then
    MINI_N8N_WORKFLOWS_DIR, so a workflow of the user's replaces an example of the same id. If
    Redis is not up yet, keep trying in the background rather than failing the api's start (it
    answers /readyz with 503 meanwhile)."""
    folders = [settings.examples_dir] if settings.demo else []
    if settings.workflows_dir:
        folders.append(settings.workflows_dir)
    for folder in folders:
        if not Path(folder).is_dir():
            log.error("workflows folder %s not found: nothing imported from it", folder)
    folders = [folder for folder in folders if Path(folder).is_dir()]
    if not folders:
        return
    rt = app.extensions["mini_n8n"]
    if not _import_once(rt, folders):
        threading.Thread(target=_import_until_done, args=(rt, folders), daemon=True).start()


def _import_once(rt, folders: list[str]) -> bool:
    try:
        for folder in folders:
            for line in import_folder(rt.workflows, folder):
                log.info(line)
        return True
    except redis.RedisError as err:
        log.warning("workflows not imported yet, Redis is not reachable: %s", err)
        return False


def _import_until_done(rt, folders: list[str]) -> None:
    delay = 0.5
    while not _import_once(rt, folders):
        time.sleep(delay)
        delay = min(delay * 2, 10.0)
