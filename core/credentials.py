"""The deployment's credentials, found the way n8n nodes reference them.

A workflow export names its credentials, never their secrets:
`"credentials": {"openAiApi": {"id": "abc", "name": "OpenAi account"}}`. The secrets live in a
JSON file named by MINI_N8N_CREDENTIALS_FILE, a list of

    {"id": "abc", "name": "OpenAi account", "type": "openAiApi",
     "data": {"apiKey": "sk-...", "url": "https://api.openai.com/v1"}}

(or `{"credentials": [...]}`), with OPENAI_API_KEY / OPENAI_BASE_URL as a last resort for
`openAiApi`, so `mini-n8n up` works with nothing but an exported key. Any type can be stored
(`httpBasicAuth`: user, password; `redis`: host, port, password, database, ssl, user); matching
is generic.

Where a credential may be sent follows n8n's "Allowed HTTP Request Domains", two fields of its
`data`: `allowedHttpRequestDomains` ("all", "domains" with `allowedDomains`, a comma-separated
list where `*.example.com` means its subdomains, or "none") decides whether a node may send the
credential to a URL the workflow chose (`check_url`). Without the field, a credential goes only
to its own URL: n8n's editor writes "all" into every new credential, but a credentials file is
written by hand, and a key sent by mistake cannot be called back.

Secrets never leave through a message, a repr or a log line: errors name the credential and its
type only, and what `resolve` returns masks its secret fields when printed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

# Fields that are safe to show; everything else in `data` is treated as a secret (an allowlist,
# so a field we have never heard of is hidden rather than printed).
PUBLIC_FIELDS = frozenset(
    {"url", "host", "port", "database", "ssl", "user", "organizationId"}
    | {"allowedHttpRequestDomains", "allowedDomains"}
)
MASK = "***"
DOMAIN_MODES = ("all", "domains", "none")  # n8n's values of allowedHttpRequestDomains
ENV_NAME = "environment (OPENAI_API_KEY)"


class CredentialError(Exception):
    """A credential is missing, ambiguous or malformed. The message never holds a secret."""


class UrlNotAllowed(CredentialError):
    """The credential may not be sent to that URL (its allowedHttpRequestDomains)."""


def _masked(data: Mapping[str, Any]) -> dict[str, Any]:
    return {k: (v if k in PUBLIC_FIELDS else MASK) for k, v in data.items()}


class ResolvedCredential(dict):
    """A credential's data (a plain dict for the node) that hides its secrets when printed."""

    def __init__(self, data: Mapping[str, Any], *, id: str, name: str, type: str):
        super().__init__(data)
        self.id = id
        self.name = name
        self.type = type

    def __repr__(self) -> str:
        return f"ResolvedCredential({self.type} {self.name!r}, {_masked(self)!r})"

    __str__ = __repr__


@dataclass(frozen=True)
class Credential:
    id: str
    name: str
    type: str
    data: dict[str, Any] = field(repr=False)

    def redacted(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "type": self.type, "data": _masked(self.data)}

    def __repr__(self) -> str:
        return f"Credential({self.type} {self.name!r}, id={self.id!r}, {_masked(self.data)!r})"

    def resolved(self) -> ResolvedCredential:
        return ResolvedCredential(self.data, id=self.id, name=self.name, type=self.type)


def _parse(entry: Any, position: int) -> Credential:
    where = f"credential #{position + 1}"
    if not isinstance(entry, Mapping):
        raise CredentialError(f"{where} is not an object")
    ctype, data = entry.get("type"), entry.get("data", {})
    if not isinstance(ctype, str) or not ctype:
        raise CredentialError(f'{where} ("{entry.get("name", "")}") has no "type"')
    if not isinstance(data, Mapping):
        raise CredentialError(
            f'{where} ("{entry.get("name", "")}") has a "data" that is not an object'
        )
    _check_domains(where, entry, data)
    return Credential(
        id=str(entry.get("id") or ""),
        name=str(entry.get("name") or ""),
        type=ctype,
        data=dict(data),
    )


def _check_domains(where: str, entry: Mapping[str, Any], data: Mapping[str, Any]) -> None:
    """n8n's editor offers only these values; a typo must not open what it meant to close."""
    mode, domains = data.get("allowedHttpRequestDomains"), data.get("allowedDomains")
    name = f'{where} ("{entry.get("name", "")}")'
    if mode is not None and mode not in DOMAIN_MODES:
        raise CredentialError(
            f'{name}: allowedHttpRequestDomains must be "all", "domains" or "none"'
        )
    if domains is not None and not isinstance(domains, str):
        raise CredentialError(f"{name}: allowedDomains must be a comma-separated string")


def check_url(credential: ResolvedCredential, url: str, own_url: str) -> None:
    """May `credential` be sent to `url`, which a workflow chose instead of the credential's own
    (`own_url`: its `url`, or the service's default)? UrlNotAllowed says why not.

    n8n's rule for a credential whose URL a node may override (`assertCredentialAllowsUrl` with
    a pinned URL, as its OpenAI nodes check `options.baseURL`): "all" allows any URL; "domains"
    the hosts its list allows; "none" its own URL only. Without the field: its own URL only
    (n8n's credentials carry "all" unless changed; see the module's docstring)."""
    mode = credential.get("allowedHttpRequestDomains")
    if mode == "all":
        return
    host = display_host(url)
    if mode == "domains":
        check_domains(url, _listed_domains(credential))
        return
    if url.rstrip("/") == own_url.rstrip("/"):
        return
    if mode == "none":
        raise UrlNotAllowed(
            f"Domain not allowed: This credential is restricted from accessing {host}."
        )
    raise UrlNotAllowed(
        f'Domain not allowed: credential "{credential.name}" belongs to {display_host(own_url)} '
        f"and is not sent to {host}. To allow it, set its allowedHttpRequestDomains to "
        f'"domains" with allowedDomains "{hostname(url) or host}", or to "all".'
    )


def request_domains(credential: ResolvedCredential, own_url: str | None = None) -> str | None:
    """The domains a node that chooses its own URL (HTTP Request and its tool) may send
    `credential` to, as n8n's getCredentialAllowedDomains: None for any, else a list for
    `check_domains`, which every request and every redirect must pass. UrlNotAllowed when it
    may go nowhere ("none").

    Without the field, a credential with a URL of its own (`own_url`: its `url`, or its type's
    default) goes to that host only, as `check_url` keeps it; one without (httpHeaderAuth,
    httpBasicAuth...) exists to be sent where the node says, so it goes anywhere, as n8n's
    default "all" lets it."""
    mode = credential.get("allowedHttpRequestDomains")
    if mode == "none":
        raise UrlNotAllowed(
            "This credential is configured to prevent use within an HTTP Request or GraphQL node"
        )
    if mode == "domains":
        return _listed_domains(credential)
    if mode is None and own_url:
        return hostname(own_url) or None
    return None


def check_domains(url: str, allowed_domains: str) -> None:
    """n8n's assertUrlAllowed: UrlNotAllowed unless `url`'s host is one `allowed_domains` lists."""
    if not domain_allowed(url, allowed_domains):
        raise UrlNotAllowed(
            f"Domain not allowed: This credential is restricted from accessing "
            f"{display_host(url)}. Only the following domains are allowed: {allowed_domains}"
        )


def _listed_domains(credential: ResolvedCredential) -> str:
    domains = str(credential.get("allowedDomains") or "").strip()
    if not domains:
        raise UrlNotAllowed(
            "No allowed domains specified. Configure allowed domains or change restriction setting."
        )
    return domains


def domain_allowed(url: str, allowed_domains: str) -> bool:
    """n8n's isDomainAllowed: `allowed_domains` is a comma-separated list of host names, case and
    a final dot ignored; `*.example.com` matches its subdomains, never example.com itself."""
    host = hostname(url)
    if not host:
        return False
    for entry in allowed_domains.split(","):
        domain = entry.strip().lower().rstrip(".").strip("[]")
        if domain.startswith("*."):
            if domain[2:] and host.endswith("." + domain[2:]):
                return True
        elif domain and host == domain:
            return True
    return False


def hostname(url: str) -> str:
    """The URL's host name, lower case, without a final dot ("" if it has none)."""
    try:
        return (urlsplit(url).hostname or "").rstrip(".")
    except ValueError:
        return ""


def display_host(url: str) -> str:
    """host[:port] of a URL, as n8n names it in these errors: never a user, password, path or
    query, which may hold secrets of their own."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "an invalid URL"
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    return f"{host}:{port}" if port else host or "an invalid URL"


def load_file(path: str) -> list[dict[str, Any]]:
    """The entries of a credentials file; errors name the file, never its content."""
    try:
        with open(path, encoding="utf-8") as f:
            content = json.load(f)
    except FileNotFoundError:
        raise CredentialError(f"credentials file {path} not found") from None
    except json.JSONDecodeError as err:
        # The decoder's message holds only a position, never the text around it.
        raise CredentialError(
            f"credentials file {path} is not valid JSON: {err.msg} (line {err.lineno})"
        ) from None
    except OSError as err:
        raise CredentialError(f"credentials file {path} cannot be read: {err.strerror}") from None
    if isinstance(content, Mapping):
        content = content.get("credentials")
    if not isinstance(content, list):
        raise CredentialError(
            f'credentials file {path} must hold a list of credentials or {{"credentials": [...]}}'
        )
    return content


class CredentialStore:
    """All credentials of one deployment; `resolve` finds the one a node refers to."""

    def __init__(
        self,
        credentials: Iterable[Mapping[str, Any]] = (),
        *,
        env: Mapping[str, str] | None = None,
    ):
        self._items = [_parse(entry, i) for i, entry in enumerate(credentials)]
        # Only the two variables the fallback needs, so a repr of the store cannot show others.
        env = env or {}
        self._env = {k: env[k] for k in ("OPENAI_API_KEY", "OPENAI_BASE_URL") if env.get(k)}

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> CredentialStore:
        environ = os.environ if environ is None else environ
        path = environ.get("MINI_N8N_CREDENTIALS_FILE")
        return cls(load_file(path) if path else [], env=environ)

    def resolve(self, type_name: str, ref: Mapping[str, Any] | None) -> ResolvedCredential:
        """The credential `ref` ({"id", "name"} from the workflow, or None) points to.

        Order: same id, then same name, then the only credential of that type, then the
        environment (openAiApi only).
        """
        candidates = [c for c in self._items if c.type == type_name]
        ref_id = str((ref or {}).get("id") or "")
        ref_name = str((ref or {}).get("name") or "")
        for wanted, attr in ((ref_id, "id"), (ref_name, "name")):
            match = next((c for c in candidates if wanted and getattr(c, attr) == wanted), None)
            if match:
                return match.resolved()
        if len(candidates) == 1:
            return candidates[0].resolved()
        fallback = self._from_env(type_name)
        if fallback is not None:
            return fallback
        raise CredentialError(self._not_found(type_name, ref_id, ref_name, len(candidates)))

    def _from_env(self, type_name: str) -> ResolvedCredential | None:
        if type_name != "openAiApi" or "OPENAI_API_KEY" not in self._env:
            return None
        data = {"apiKey": self._env["OPENAI_API_KEY"]}
        if "OPENAI_BASE_URL" in self._env:
            data["url"] = self._env["OPENAI_BASE_URL"]
        return ResolvedCredential(data, id="", name=ENV_NAME, type=type_name)

    @staticmethod
    def _not_found(type_name: str, ref_id: str, ref_name: str, count: int) -> str:
        wanted = f'credential "{ref_name or ref_id}"' if (ref_name or ref_id) else "a credential"
        if ref_id and ref_name:
            wanted += f" (id {ref_id})"
        if count > 1:
            return (
                f"{wanted} of type {type_name} not found, and there are {count} credentials of "
                "that type to choose from: match its id or name in MINI_N8N_CREDENTIALS_FILE"
            )
        hint = " or set OPENAI_API_KEY" if type_name == "openAiApi" else ""
        return f"{wanted} of type {type_name} not found: add it to MINI_N8N_CREDENTIALS_FILE{hint}"

    def has_type(self, type_name: str) -> bool:
        """Whether a credential of this type is configured (the environment's openAiApi too)."""
        return any(c.type == type_name for c in self._items) or (
            self._from_env(type_name) is not None
        )

    def redacted(self) -> list[dict[str, Any]]:
        items = [c.redacted() for c in self._items]
        fallback = self._from_env("openAiApi")
        if fallback is not None:
            items.append(
                {"id": "", "name": ENV_NAME, "type": "openAiApi", "data": _masked(fallback)}
            )
        return items

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        names = ", ".join(f"{c.type} {c.name!r}" for c in self._items)
        env = ", env fallback" if self._env else ""
        return f"CredentialStore([{names}]{env})"
