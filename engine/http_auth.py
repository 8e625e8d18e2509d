"""The HTTP Request node's authentication: the credential its parameters name, found in the
deployment's credentials (core/credentials.py), turned into what the request carries (headers, a
query field, basic auth, body fields) and where it may go.

Where a credential may be sent is n8n's "Allowed HTTP Request Domains" (core/credentials.py
`request_domains`): the request's URL and every redirect's must be on its list. The values that
are secret are kept apart, so an error that repeats a server's answer can hide them.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from core.credentials import (
    PUBLIC_FIELDS,
    CredentialError,
    ResolvedCredential,
    check_domains,
    request_domains,
)
from engine.errors import NodeExecutionError
from engine.model_settings import DEFAULT_BASE_URL
from engine.node import ExecuteFunctions

REDACTED = "**hidden**"  # n8n's word for a hidden value


@dataclass
class Authentication:
    credential_type: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    query: dict[str, Any] = field(default_factory=dict)
    body: dict[str, Any] = field(default_factory=dict)
    allowed_domains: str | None = None  # None: any host
    secrets: tuple[str, ...] = ()

    def header_names(self) -> frozenset[str]:
        return frozenset(name.lower() for name in self.headers)

    def check(self, url: str, node: str, index: int) -> None:
        """The credential may be sent to `url`, or NodeExecutionError says why not."""
        if self.allowed_domains is None:
            return
        try:
            check_domains(url, self.allowed_domains)
        except CredentialError as err:
            raise NodeExecutionError(str(err), node=node, item_index=index) from None

    def hide(self, text: str) -> str:
        """`text` with every secret value of the credential replaced (n8n's redaction)."""
        for secret in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(secret, REDACTED)
        return text


def authentication(ctx: ExecuteFunctions, index: int) -> Authentication:
    """What the node's `authentication` parameters add to item `index`'s request."""
    mode = ctx.get_parameter("authentication", "none", 0)
    if mode == "genericCredentialType":
        kind = ctx.get_parameter("genericAuthType", "", 0)
    elif mode == "predefinedCredentialType":
        kind = ctx.get_parameter("nodeCredentialType", "", index)
    else:
        return Authentication()
    credential = _credential(ctx, str(kind or ""), index)
    try:
        own_url = str(credential.get("url") or DEFAULT_BASE_URL) if kind == "openAiApi" else None
        auth = _APPLY[credential.type](credential)
        auth.allowed_domains = request_domains(credential, own_url)
    except (CredentialError, KeyError, ValueError) as err:
        message = str(err) if not isinstance(err, KeyError) else f"unknown credential type {kind}"
        raise NodeExecutionError(message, node=ctx.node.name, item_index=index) from None
    auth.credential_type = credential.type
    auth.secrets = tuple(
        str(v) for k, v in credential.items() if k not in PUBLIC_FIELDS and isinstance(v, str) and v
    )
    return auth


def _credential(ctx: ExecuteFunctions, kind: str, index: int) -> ResolvedCredential:
    if kind not in _APPLY:
        raise NodeExecutionError(
            f'credential type "{kind}" is not supported by the HTTP Request node here',
            node=ctx.node.name,
            item_index=index,
        )
    store = ctx.services.credentials
    if store is None:
        raise NodeExecutionError(
            "no credentials are configured for this deployment", node=ctx.node.name
        )
    try:
        return store.resolve(kind, (ctx.node.credentials or {}).get(kind))
    except CredentialError as err:
        raise NodeExecutionError(str(err), node=ctx.node.name, item_index=index) from None


def _basic(c: ResolvedCredential) -> Authentication:
    pair = f"{c.get('user') or ''}:{c.get('password') or ''}".encode()
    return Authentication(headers={"Authorization": "Basic " + base64.b64encode(pair).decode()})


def _bearer(c: ResolvedCredential) -> Authentication:
    return Authentication(headers={"Authorization": f"Bearer {c.get('token') or ''}"})


def _header(c: ResolvedCredential) -> Authentication:
    return Authentication(headers={str(c.get("name") or ""): str(c.get("value") or "")})


def _query(c: ResolvedCredential) -> Authentication:
    return Authentication(query={str(c.get("name") or ""): str(c.get("value") or "")})


def _custom(c: ResolvedCredential) -> Authentication:
    try:
        custom = json.loads(str(c.get("json") or "{}"))
    except ValueError:
        raise ValueError("Invalid Custom Auth JSON") from None
    if not isinstance(custom, dict):
        raise ValueError("Invalid Custom Auth JSON")
    parts: dict[str, dict[str, Any]] = {}
    for key in ("headers", "qs", "body"):
        value = custom.get(key)
        parts[key] = value if isinstance(value, dict) else {}
    headers = {str(k): str(v) for k, v in parts["headers"].items()}
    return Authentication(headers=headers, query=parts["qs"], body=parts["body"])


def _openai(c: ResolvedCredential) -> Authentication:
    """openAiApi's `authenticate`: the key as a bearer token, its organization and custom header."""
    headers = {"Authorization": f"Bearer {c.get('apiKey') or ''}"}
    if c.get("organizationId"):
        headers["OpenAI-Organization"] = str(c["organizationId"])
    name, value = c.get("headerName"), c.get("headerValue")
    if c.get("header") and isinstance(name, str) and name and isinstance(value, str):
        headers[name] = value
    return Authentication(headers=headers)


_APPLY = {
    "httpBasicAuth": _basic,
    "httpBearerAuth": _bearer,
    "httpHeaderAuth": _header,
    "httpQueryAuth": _query,
    "httpCustomAuth": _custom,
    "openAiApi": _openai,
}
