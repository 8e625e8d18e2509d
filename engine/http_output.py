"""An HTTP Request node's answer as items, and its failures as n8n words them.

Items follow n8n's HttpRequestV3: with Response Format "autodetect" a JSON answer becomes its
object (an array: an item per element), a file type a binary item, anything else text in
`data`; "Include Response Headers and Status" adds `headers`, `statusCode`, `statusMessage`.
A status other than 2xx fails the node with n8n's NodeApiError message for it ("The resource you
are requesting could not be found", httpCode "404"), unless "Never Error"; a request that got no
answer fails with n8n's message for its network error code. The server's own words go to the
error's description, with the credential's secrets hidden.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable
from typing import Any

from core import jsontext
from engine.binary_data import binary_entry
from engine.errors import NodeApiError, NodeExecutionError
from engine.http_auth import Authentication
from engine.http_build import ResponseSettings
from engine.http_client import HttpFailure, IncomingResponse
from engine.node import Item

# n8n's binaryContentTypes: an autodetected answer of these types is a file.
BINARY_TYPES = (
    "image/", "audio/", "video/", "application/octet-stream", "application/gzip",
    "application/zip", "application/vnd.rar", "application/epub+zip", "application/x-bzip",
    "application/x-bzip2", "application/x-cdf", "application/vnd.amazon.ebook",
    "application/msword",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "application/vnd.ms-fontobject", "application/vnd.oasis.opendocument.presentation",
    "application/pdf", "application/x-tar", "application/vnd.visio", "application/vnd.ms-excel",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "application/x-7z-compressed",
)  # fmt: skip
# n8n's NodeApiError messages per status.
STATUS_MESSAGES = {
    "4XX": "Your request is invalid or could not be processed by the service",
    "400": "Bad request - please check your parameters",
    "401": "Authorization failed - please check your credentials",
    "402": "Payment required - perhaps check your payment details?",
    "403": "Forbidden - perhaps check your credentials?",
    "404": "The resource you are requesting could not be found",
    "405": "Method not allowed - please check you are using the right HTTP method",
    "429": "The service is receiving too many requests from you",
    "5XX": "The service failed to process your request",
    "500": "The service was not able to process your request",
    "502": "Bad gateway - the service failed to handle your request",
    "503": "Service unavailable - try again later or consider setting this node to retry "
    "automatically (in the node settings)",
    "504": "Gateway timed out - perhaps try again later?",
}
# n8n's COMMON_ERRORS: what a network error code tells a user.
NETWORK_MESSAGES = {
    "ECONNREFUSED": "The service refused the connection - perhaps it is offline",
    "ECONNRESET": "The connection to the server was closed unexpectedly, perhaps it is offline. "
    "You can retry the request immediately or wait and retry later.",
    "ENOTFOUND": "The connection cannot be established, this usually occurs due to an incorrect "
    "host (domain) value",
    "ETIMEDOUT": "The connection timed out, consider setting the 'Retry on Fail' option in the "
    "node settings",
    "ECONNABORTED": "The connection was aborted, perhaps the server is offline",
    "EHOSTUNREACH": "The host is unreachable, perhaps the server is offline",
    "EAI_AGAIN": "The DNS server returned an error, perhaps the server is offline",
}
# Where n8n's NodeApiError looks for a service's own message, in its order.
MESSAGE_KEYS = ("message", "error", "msg", "description", "reason", "detail", "details",
                "errorMessage", "error_description", "title", "text")  # fmt: skip
MAX_DESCRIPTION = 2000
_CHARSET = re.compile(r"charset=([^;,\s]+)", re.IGNORECASE)


def status_error(
    response: IncomingResponse, auth: Authentication, node: str, index: int
) -> NodeApiError:
    code = str(response.status)
    message = STATUS_MESSAGES.get(code) or STATUS_MESSAGES.get(f"{code[0]}XX")
    # Another status (a redirect not followed): n8n's request helper words it as
    # `<status> - <the body as a JSON string>`.
    message = message or f"{code} - {json.dumps(decode(response), ensure_ascii=False)}"
    words = _service_words(response)
    description = auth.hide(words)[:MAX_DESCRIPTION] if words else None
    return NodeApiError(
        message,
        node=node,
        item_index=index,
        http_code=code,
        description=None if description == message else description,
    )


def failure_error(failure: HttpFailure, node: str, index: int) -> NodeApiError:
    """A network error as n8n words it (its code as httpCode, no description: n8n keeps the
    system's own text, "connect ECONNREFUSED ...", among its messages only); one of ours with
    its own message and description."""
    if failure.code in NETWORK_MESSAGES:
        message, code, description = NETWORK_MESSAGES[failure.code], failure.code, None
    else:
        message, code, description = failure.message, None, failure.description or None
    return NodeApiError(
        message, node=node, item_index=index, http_code=code, description=description
    )


def _service_words(response: IncomingResponse) -> str:
    text = decode(response)
    parsed = _json(text)
    if isinstance(parsed, dict):
        for key in MESSAGE_KEYS:
            value = parsed.get(key)
            if isinstance(value, dict) and isinstance(value.get("message"), str):
                return value["message"]
            if isinstance(value, str) and value:
                return value
    return text.strip()


def decode(response: IncomingResponse) -> str:
    """The body as text in the charset its Content-Type names (UTF-8 otherwise)."""
    match = _CHARSET.search(response.header("content-type") or "")
    encoding = match.group(1).strip("'\"").lower() if match else "utf-8"
    try:
        codecs.lookup(encoding)
    except LookupError:
        encoding = "utf-8"
    return response.body.decode(encoding, "replace")


def _json(text: str) -> Any:
    """The JSON value of `text`, or None if it is none."""
    try:
        return jsontext.loads(text)
    except (ValueError, RecursionError):
        return None


def _axios_value(text: str) -> Any:
    """What axios makes of a body it may parse: JSON if it is, else the text."""
    parsed = _json(text) if text.strip() else None
    return text if parsed is None and text.strip() != "null" else parsed


def items(
    response: IncomingResponse,
    settings: ResponseSettings,
    item: Item,
    index: int,
    node: str,
    output_field: str | None,
    optimize: Callable[[Any], Any] | None = None,
) -> list[Item]:
    """The items of item `index`'s answer (`output_field`: the option as set, for file names;
    `optimize`: the HTTP Request Tool's, engine/http_optimize.py)."""
    content_type = response.header("content-type") or ""
    kind = settings.format
    text: str | None = None
    if kind == "autodetect":
        if "application/json" in content_type:
            kind, value = "json", _autodetected_json(response, settings, node, index)
        elif any(t in content_type for t in BINARY_TYPES):
            kind, value = "file", None
        else:
            text = decode(response)
            kind, value = "text", text or None
    elif kind in ("json", "text"):
        text = decode(response)
        value = _axios_value(text)
    else:
        value = None
    if optimize is not None and kind != "file":
        value = optimize(value)
        kind = "text" if isinstance(value, str) else "json"
    paired = {"item": index}
    if kind == "file":
        return [_file_item(response, settings, item, paired, output_field)]
    if kind == "text":
        return [_text_item(response, settings, value, paired)]
    return _json_items(response, settings, value, paired, node, index)


def _autodetected_json(
    response: IncomingResponse, settings: ResponseSettings, node: str, index: int
) -> Any:
    text = decode(response)
    if not text.strip():
        return {}
    parsed = _json(text)
    if parsed is None and text.strip() != "null":
        if settings.never_error:
            return {}
        raise NodeExecutionError("Invalid JSON in response body", node=node, item_index=index)
    return parsed


def _full(response: IncomingResponse) -> dict[str, Any]:
    return {
        "headers": response.headers_json(),
        "statusCode": response.status,
        "statusMessage": response.reason,
    }


def _text_item(response: IncomingResponse, settings: ResponseSettings, value: Any,
               paired: dict) -> Item:  # fmt: skip
    text = jsontext.dumps(value) if isinstance(value, dict | list) else value
    data: dict[str, Any] = {} if text is None else {settings.output_field: text}
    if settings.full:
        data = {settings.output_field: text, **_full(response)}
    return {"json": data, "pairedItem": paired}


def _json_items(
    response: IncomingResponse,
    settings: ResponseSettings,
    value: Any,
    paired: dict,
    node: str,
    index: int,
) -> list[Item]:
    if isinstance(value, str):
        if value.strip():
            raise NodeExecutionError(
                'Response body is not valid JSON. Change "Response Format" to "Text"',
                node=node,
                item_index=index,
            )
        value = {}
    if settings.full:
        return [{"json": {"body": value, **_full(response)}, "pairedItem": paired}]
    values = value if isinstance(value, list) else [value]
    return [{"json": _as_object(v), "pairedItem": paired} for v in values]


def _as_object(value: Any) -> dict[str, Any]:
    """An item's json: null becomes {} (n8n's replaceNullValues); another value that is not an
    object is kept under `data`, as an item must hold an object here."""
    if value is None:
        return {}
    return value if isinstance(value, dict) else {"data": value}


def _file_item(
    response: IncomingResponse,
    settings: ResponseSettings,
    item: Item,
    paired: dict,
    output_field: str | None,
) -> Item:
    mime = (response.header("content-type") or "").split(" ")[0].split(";")[0]
    entry = binary_entry(response.body, mime or "application/octet-stream")
    extension = entry.get("fileExtension")
    if extension:
        path = response.url.split("?")[0].split("#")[0]
        last = path.rsplit("/", 1)[-1]
        entry["fileName"] = (
            last if last.endswith(extension) else f"{output_field or 'data'}.{extension}"
        )
    data = _full(response) if settings.full else dict(item.get("json") or {})
    binary = {**(item.get("binary") or {}), settings.output_field: entry}
    return {"json": data, "binary": binary, "pairedItem": paired}
