"""The hosted chat page a public Chat Trigger serves on GET (n8n's `createPage`, without a CDN).

One self-contained HTML response: the markup, style and script come from `static/chat/` and are
inlined, so the page works offline and under any path prefix. The workflow's strings (title,
subtitle, placeholder, initial messages) go into a JSON data block, escaped for a script context
as n8n's `escapeForScriptContext` does; the script reads them with JSON.parse and renders them
with textContent only. A Content-Security-Policy with a per-response nonce lets only our own
inline script and style run, so even a slip in escaping could not run injected code.
"""

from __future__ import annotations

import functools
import re
import secrets
from pathlib import Path
from typing import Any

from flask import Response

from api import cors
from core.jsontext import dumps
from engine.nodes.chat_trigger import ChatSettings

STATIC = Path(__file__).parent / "static" / "chat"
PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
SCRIPT_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}  # fmt: skip


def escape_for_script(value: Any) -> str:
    """JSON that can sit inside <script>: no `</script>`, `<!--` or JS line terminators."""
    text = dumps(value)
    return re.sub("[<>&\u2028\u2029]", lambda m: SCRIPT_ESCAPES[m.group(0)], text)


@functools.cache
def _assets() -> dict[str, str]:
    assets = {name: (STATIC / f"chat.{name}").read_text(encoding="utf-8") for name in ("js", "css")}
    assets["html"] = (STATIC / "index.html").read_text(encoding="utf-8")
    # The inlined files are ours; make sure neither can close its own element early.
    if "</script" in assets["js"].lower() or "</style" in assets["css"].lower():
        raise RuntimeError("static/chat: an inlined file closes its own element")
    return assets


def page_config(workflow, params: dict[str, Any]) -> dict[str, Any]:
    options = params["options"]
    return {
        "workflowId": workflow.id,
        "title": _text(options.get("title")),
        "subtitle": _text(options.get("subtitle")),
        "inputPlaceholder": _text(options.get("inputPlaceholder")),
        "newConversation": _text(options.get("getStarted")) or "New conversation",
        "initialMessages": initial_messages(params.get("initialMessages")),
        "loadPreviousSession": options.get("loadPreviousSession", "notSupported") != "notSupported",
        "allowFileUploads": options.get("allowFileUploads") is True,
        "allowedFilesMimeTypes": _text(options.get("allowedFilesMimeTypes")) or "*",
    }


def initial_messages(value: Any) -> list[str]:
    """One message per line, trimmed, empty lines dropped (n8n's template does the same)."""
    return [line.strip() for line in _text(value).split("\n") if line.strip()]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def render_page(config: dict[str, Any], nonce: str) -> str:
    assets = _assets()
    parts = {"nonce": nonce, "config": escape_for_script(config), **assets}
    # One pass: text that was substituted in is never scanned for placeholders again.
    return PLACEHOLDER.sub(lambda m: parts[m.group(1)], assets["html"])


def page_response(workflow, chat: ChatSettings) -> Response:
    nonce = secrets.token_urlsafe(16)
    csp = (
        f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; "
        "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
        f"frame-ancestors {cors.frame_ancestors(chat.allowed_origins)}"
    )
    html = render_page(page_config(workflow, chat.params), nonce)
    return Response(
        html,
        content_type="text/html; charset=utf-8",
        headers={
            "Content-Security-Policy": csp,
            "Cache-Control": "no-store",
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "same-origin",
        },
    )
