"""The HTTP Request node's request for one item, built from its parameters as n8n's version 3 to
4.5 build it (its HttpRequestV3 and the request helper under it): the URL and its query, the
headers, the body in the chosen content type, the credential's parts, and the rules the client
follows (timeout, redirects). Pure: no I/O, so every case is a unit test.
"""

from __future__ import annotations

import base64
import binascii
import secrets as random
from dataclasses import dataclass
from typing import Any

from core.jsontext import dumps_bytes, loads_request
from engine.errors import NodeExecutionError
from engine.http_auth import Authentication
from engine.http_client import MAX_REDIRECTS, OutgoingRequest
from engine.node import ExecuteFunctions, Item
from engine.query_string import qs_stringify, search_params, with_query

DEFAULT_TIMEOUT_MS = 300_000  # n8n's when the option is not set: five minutes
METHODS_WITHOUT_BODY = ("HEAD", "OPTIONS", "TRACE")
USER_AGENT = "n8n"  # what n8n sends unless told otherwise
ACCEPT = {
    "json": "application/json,text/*;q=0.99",
    "text": "application/json,text/html,application/xhtml+xml,application/xml,text/*;q=0.9, "
    "*/*;q=0.1",
}
ACCEPT_ANY = (
    "application/json,text/html,application/xhtml+xml,application/xml,text/*;q=0.9, "
    "image/*;q=0.8, */*;q=0.7"
)


@dataclass(frozen=True)
class ResponseSettings:
    """How the answer becomes items (options.response)."""

    format: str = "autodetect"  # autodetect, json, text, file
    full: bool = False  # fullResponse: status and headers too
    never_error: bool = False
    output_field: str = "data"


class ItemParameters:
    """One item's parameters as n8n's node reads them: a parameter the form hides counts as
    absent and gives the fallback the node asks with, as n8n's getNodeParameter does; options
    are those the node sets (n8n's collections carry no defaults)."""

    def __init__(self, ctx: ExecuteFunctions, index: int, shown: set[str]):
        self.ctx, self.index, self.shown = ctx, index, shown
        raw = ctx.node.parameters.get("options")
        self.set_options = set(raw) if isinstance(raw, dict) else set()

    def get(self, path: str, fallback: Any) -> Any:
        if path.split(".")[0] not in self.shown:
            return fallback
        value = self.ctx.get_parameter(path, fallback, self.index)
        return fallback if value is None else value

    def option(self, name: str) -> Any:
        if name not in self.set_options:
            return None
        return self.ctx.get_parameter(f"options.{name}", None, self.index)

    def fail(self, message: str) -> NodeExecutionError:
        return NodeExecutionError(message, node=self.ctx.node.name, item_index=self.index)


def url_of(p: ItemParameters) -> str:
    url = p.get("url", "")
    if not isinstance(url, str):
        kind = "null" if url is None else type(url).__name__
        raise p.fail(f"URL parameter must be a string, got {kind}")
    url = url.strip()
    if not url:
        raise p.fail("URL parameter cannot be empty")
    if not url.startswith(("http://", "https://")):
        raise p.fail(f'Invalid URL: {url}. URL must start with "http" or "https".')
    return url


def json_parameter(p: ItemParameters, path: str, label: str) -> Any:
    value = p.get(path, "")
    if isinstance(value, dict | list):
        return value  # an expression that gave an object
    try:
        return loads_request(str(value))
    except ValueError as err:
        raise NodeExecutionError(
            f'The value in the "{label}" field is not valid JSON',
            node=p.ctx.node.name,
            item_index=p.index,
        ) from err


def _key_values(rows: Any, version: float, skip_unnamed: bool = False) -> dict[str, Any]:
    """name/value rows as one object: a repeated name overwrites before 4.3, and collects its
    values into a list from 4.3 on (n8n's updadeQueryParameterConfig)."""
    out: dict[str, Any] = {}
    for row in rows if isinstance(rows, list) else []:
        if not isinstance(row, dict) or (skip_unnamed and not row.get("name")):
            continue
        name, value = str(row.get("name", "")), row.get("value", "")
        if version < 4.3 or name not in out:
            out[name] = value
        elif isinstance(out[name], list):
            out[name].append(value)
        else:
            out[name] = [out[name], value]
    return out


def _set_path(target: dict[str, Any], path: str, value: Any) -> None:
    """lodash's set with a dotted name: `a.b` makes {"a": {"b": value}}."""
    parts = path.split(".") if path else [""]
    for part in parts[:-1]:
        nested = target.get(part)
        if not isinstance(nested, dict):
            nested = target[part] = {}
        target = nested
    target[parts[-1]] = value


def query_of(p: ItemParameters, version: float, auth: Authentication) -> str:
    query: dict[str, Any] = {}
    if p.get("sendQuery", False):
        if p.get("specifyQuery", "keypair") == "json":
            parsed = json_parameter(p, "jsonQuery", "JSON Query Parameters")
            query = parsed if isinstance(parsed, dict) else {}
        else:
            query = _key_values(p.get("queryParameters.parameters", []), version)
    query.update(auth.query)
    arrays = p.option("queryParameterArrays") if p.get("sendQuery", False) else None
    return qs_stringify(query, arrays if arrays in ("repeat", "brackets") else "indices")


def headers_of(p: ItemParameters, version: float) -> dict[str, str]:
    if not p.get("sendHeaders", False):
        return {}
    if p.get("specifyHeaders", "keypair") == "json":
        parsed = json_parameter(p, "jsonHeaders", "JSON Headers")
        given = parsed if isinstance(parsed, dict) else {}
    else:
        given = _key_values(p.get("headerParameters.parameters", []), version, skip_unnamed=True)
    lower = p.option("lowercaseHeaders")
    fold = lower is None or bool(lower)
    return {(k.lower() if fold else k): _header_value(v) for k, v in given.items()}


def _header_value(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(_header_value(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


@dataclass
class Body:
    content: bytes | None = None
    content_type: str | None = None  # what the body needs (overrides the user's header)
    default_type: str | None = None  # what the body gets unless the user's headers name one


def body_of(p: ItemParameters, version: float, item: Item, auth: Authentication) -> Body:
    """The body as n8n sends it for `contentType`, its fields merged with a custom auth's."""
    method = str(p.get("method", "GET"))
    if not p.get("sendBody", False):
        return _custom_only(auth)
    kind = p.get("contentType", "")
    fields = _fields(p, version, kind)
    if method in METHODS_WITHOUT_BODY or kind == "json":
        if isinstance(fields, dict) and auth.body:
            fields = {**fields, **auth.body}
        return _json_body(fields)
    if kind == "form-urlencoded":
        form = {**(fields if isinstance(fields, dict) else {}), **auth.body}
        return Body(qs_stringify(form).encode(), "application/x-www-form-urlencoded")
    if kind == "multipart-form-data":
        return _multipart(p, item)
    if kind == "binaryData":
        data, mime = _binary(p, item, str(p.get("inputDataFieldName", "")))
        return Body(data, mime or "application/octet-stream")
    if kind == "raw":
        return Body(str(p.get("body", "")).encode(), None)
    return _json_body(fields)


def _custom_only(auth: Authentication) -> Body:
    return _json_body(auth.body) if auth.body else Body()


def _json_body(fields: Any) -> Body:
    if fields is None or fields == "":
        return Body()
    if isinstance(fields, str):
        return Body(fields.encode(), None)
    return Body(dumps_bytes(fields), None, "application/json")


def _fields(p: ItemParameters, version: float, kind: str) -> Any:
    specify = p.get("specifyBody", "")
    if specify == "keypair" or kind == "multipart-form-data":
        rows = p.get("bodyParameters.parameters", [])
        if kind == "json" and version >= 4:
            body: dict[str, Any] = {}
            for row in rows if isinstance(rows, list) else []:
                if isinstance(row, dict):
                    _set_path(body, str(row.get("name", "")), row.get("value", ""))
            return body
        return _key_values(rows, version)
    if specify == "json":
        return json_parameter(p, "jsonBody", "JSON Body")
    if specify == "string":
        return search_params(str(p.get("body", "")))
    return None


def _binary(p: ItemParameters, item: Item, field: str) -> tuple[bytes, str | None]:
    entry = (item.get("binary") or {}).get(field)
    if not isinstance(entry, dict):
        raise p.fail(f'This operation expects the node\'s input data to contain a binary file '
                     f'\'{field}\', but none was found')  # fmt: skip
    try:
        return base64.b64decode(str(entry.get("data") or ""), validate=True), entry.get("mimeType")
    except (binascii.Error, ValueError):
        raise p.fail(f"the binary file '{field}' is not valid base64") from None


def _multipart(p: ItemParameters, item: Item) -> Body:
    """multipart/form-data as the form-data package writes it: its boundary, a part per field,
    a file part with its name and type."""
    boundary = "--------------------------" + "".join(str(random.randbelow(10)) for _ in range(24))
    parts = []
    for row in p.get("bodyParameters.parameters", []) or []:
        if not isinstance(row, dict):
            continue
        name = str(row.get("name", ""))
        head = f'Content-Disposition: form-data; name="{name}"'
        if row.get("parameterType") == "formBinaryData":
            field = str(row.get("inputDataFieldName") or "")
            if not field:
                continue
            data, mime = _binary(p, item, field)
            file_name = ((item.get("binary") or {}).get(field) or {}).get("fileName") or "file"
            head += (
                f'; filename="{file_name}"\r\nContent-Type: {mime or "application/octet-stream"}'
            )
        else:
            value = row.get("value", "")
            data = (value if isinstance(value, str) else str(value)).encode()
        parts.append(f"--{boundary}\r\n{head}\r\n\r\n".encode() + data + b"\r\n")
    content = b"".join(parts) + f"--{boundary}--\r\n".encode()
    return Body(content, f"multipart/form-data; boundary={boundary}")


def response_settings(p: ItemParameters) -> ResponseSettings:
    group = (p.option("response") or {}).get("response") or {}
    return ResponseSettings(
        format=str(group.get("responseFormat") or "autodetect"),
        full=bool(group.get("fullResponse")),
        never_error=bool(group.get("neverError")),
        output_field=str(group.get("outputPropertyName") or "data"),
    )


def redirects(p: ItemParameters, version: float) -> int:
    """How many redirects are followed (0: none; n8n's followAllRedirects then applies to every
    method): from version 4 on all, up to 21, unless the option says otherwise; before, none
    unless the option is set."""
    option = p.option("redirect")
    group = (option or {}).get("redirect") or {} if isinstance(option, dict) else None
    follows = version >= 4 if group is None else bool(group.get("followRedirects", version >= 4))
    most = (group or {}).get("maxRedirects")
    if not follows:
        return 0
    return int(most) if isinstance(most, int | float) else MAX_REDIRECTS


def _headers(p: ItemParameters, version: float, auth: Authentication, body: Body,
             response: ResponseSettings) -> dict[str, str]:  # fmt: skip
    """The request's headers: the parameters', the credential's, then n8n's defaults."""
    headers = headers_of(p, version)
    if p.get("sendBody", False) and p.get("contentType", "") == "raw":
        headers["content-type"] = str(p.get("rawContentType", ""))
    headers.update(auth.headers)
    present = {k.lower() for k in headers}
    if "accept" not in headers:
        headers["accept"] = ACCEPT.get(response.format, ACCEPT_ANY)
    if body.content_type:
        headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
        headers["Content-Type"] = body.content_type
    elif body.default_type and "content-type" not in present:
        headers["content-type"] = body.default_type
    if "user-agent" not in present:
        headers["User-Agent"] = USER_AGENT
    return headers


def build(
    p: ItemParameters, version: float, auth: Authentication, item: Item
) -> tuple[OutgoingRequest, ResponseSettings]:
    """Item `p.index`'s request and how its answer is read."""
    url = url_of(p)
    response = response_settings(p)
    body = body_of(p, version, item, auth)
    most = redirects(p, version)
    timeout = p.option("timeout")
    cross = p.option("sendCredentialsOnCrossOriginRedirect")
    request = OutgoingRequest(
        method=str(p.get("method", "GET")).upper(),
        url=with_query(url, query_of(p, version, auth)),
        headers=tuple(_headers(p, version, auth, body, response).items()),
        body=body.content,
        timeout=(
            timeout if isinstance(timeout, int | float) and timeout > 0 else DEFAULT_TIMEOUT_MS
        )
        / 1000,  # fmt: skip
        max_redirects=most,
        redirect_any_method=most > 0,
        credential_headers=auth.header_names(),
        credentials_cross_origin=version < 4.4 if cross is None else bool(cross),
        allowed_domains=auth.allowed_domains,
        verify_tls=not p.option("allowUnauthorizedCerts"),
    )
    return request, response
