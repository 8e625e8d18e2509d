"""The hosted chat page a public Chat Trigger serves on GET (n8n's `createPage`, without a CDN).

One self-contained HTML response: the markup, style and script come from `static/chat/` and are
inlined, so the page works offline and under any path prefix. The workflow's strings (title,
subtitle, placeholder, start button, initial messages) are made plain text as n8n's page makes
them (`plain_text`: tags dropped, the content of script, style, textarea and option too, and
`javascript:`, `data:`, `vbscript:` removed; the initial messages one per line) and go into a
JSON data block, escaped for a script context as n8n's `escapeForScriptContext` does; the script
reads them with JSON.parse and renders them with textContent only. The option `customCss` goes
into a style element of its own after ours, as n8n's page puts it after the widget's, with every
`</style` taken out. A Content-Security-Policy with a per-response nonce lets only our own
inline script and styles run, so even a slip in escaping could not run injected code; with
custom CSS, the stylesheets, fonts and images it names over https may load too.
"""

from __future__ import annotations

import functools
import re
import secrets
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from flask import Response

from api import cors
from core.jsontext import dumps
from engine.nodes.chat_trigger import ChatSettings

STATIC = Path(__file__).parent / "static" / "chat"
PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
SCRIPT_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}  # fmt: skip
# sanitize-html's nonTextTags: with the tag goes its content.
NON_TEXT_TAGS = frozenset({"script", "style", "textarea", "option"})
UNSAFE_SCHEMES = ("javascript:", "data:", "vbscript:")  # n8n removes each, in this order
# htmlparser2 drops a tag still open at the end of the text ("x<y" reads "x"); Python's keeps it.
_OPEN_AT_END = re.compile(r"<[A-Za-z!/?][^>]*\Z")
_STYLE_END = re.compile("</style", re.IGNORECASE)


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


def page_config(workflow, chat: ChatSettings) -> dict[str, Any]:
    options = chat.params["options"]
    return {
        "workflowId": workflow.id,
        "title": plain_text(options.get("title")),
        "subtitle": plain_text(options.get("subtitle")),
        "inputPlaceholder": plain_text(options.get("inputPlaceholder")),
        "newConversation": plain_text(options.get("getStarted")) or "New Conversation",
        "showWelcomeScreen": chat.given("showWelcomeScreen") is True,
        "initialMessages": initial_messages(chat.params.get("initialMessages")),
        "loadPreviousSession": options.get("loadPreviousSession", "notSupported") != "notSupported",
        "allowFileUploads": options.get("allowFileUploads") is True,
        "allowedFilesMimeTypes": plain_text(options.get("allowedFilesMimeTypes")) or "*",
    }


def initial_messages(value: Any) -> list[str]:
    """n8n's getSanitizedInitialMessages: the plain text, one message per line, trimmed, empty
    lines dropped."""
    return [line for line in (_trim(x) for x in plain_text(value).split("\n")) if line]


def plain_text(value: Any) -> str:
    """n8n's sanitizeUserInput (sanitize-html with no tag allowed), as the text it shows: tags
    and comments dropped, the content of non-text tags too, entities read, then `javascript:`,
    `data:` and `vbscript:` removed (each once over, as n8n does). A number is its text; any
    other value is empty."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return ""
    if not isinstance(value, str):
        value = str(int(value)) if float(value).is_integer() else str(value)
    reader = _TextOnly()
    reader.feed(_OPEN_AT_END.sub("", value))
    reader.close()
    text = "".join(reader.parts)
    for scheme in UNSAFE_SCHEMES:
        text = re.sub(re.escape(scheme), "", text, flags=re.IGNORECASE)
    return text


class _TextOnly(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping = 0  # how deep inside non-text tags

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in NON_TEXT_TAGS:
            self.skipping += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in NON_TEXT_TAGS and self.skipping:
            self.skipping -= 1

    def handle_data(self, data: str) -> None:
        if not self.skipping:
            self.parts.append(data)


def custom_css(value: Any) -> str:
    """The option `customCss` for its style element: n8n takes `</style` out once; we until none
    is left, so no text can close the element (`</st</styleyle>` leaves none either)."""
    css = value if isinstance(value, str) else ""
    while (cleaned := _STYLE_END.sub("", css)) != css:
        css = cleaned
    return css


def _trim(text: str) -> str:
    return text.strip().strip("\ufeff").strip()  # JavaScript's trim() takes the BOM too


def render_page(config: dict[str, Any], nonce: str, css: str = "") -> str:
    assets = _assets()
    parts = {"nonce": nonce, "config": escape_for_script(config), "customCss": css, **assets}
    # One pass: text that was substituted in is never scanned for placeholders again.
    return PLACEHOLDER.sub(lambda m: parts[m.group(1)], assets["html"])


def page_response(workflow, chat: ChatSettings) -> Response:
    nonce = secrets.token_urlsafe(16)
    css = custom_css(chat.given("customCss"))
    # What custom CSS names over https (a stylesheet, a web font, an image) may load, as on
    # n8n's page; scripts stay ours alone.
    remote = " https:" if css else ""
    fonts = "font-src https: data:; " if css else ""
    csp = (
        f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'{remote}; "
        f"connect-src 'self'; img-src 'self' data:{remote}; {fonts}base-uri 'none'; "
        f"form-action 'none'; frame-ancestors {cors.frame_ancestors(chat.allowed_origins)}"
    )
    html = render_page(page_config(workflow, chat), nonce, css)
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
