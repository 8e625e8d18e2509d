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

Secrets never leave through a message, a repr or a log line: errors name the credential and its
type only, and what `resolve` returns masks its secret fields when printed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# Fields that are safe to show; everything else in `data` is treated as a secret (an allowlist,
# so a field we have never heard of is hidden rather than printed).
PUBLIC_FIELDS = frozenset({"url", "host", "port", "database", "ssl", "user", "organizationId"})
MASK = "***"
ENV_NAME = "environment (OPENAI_API_KEY)"


class CredentialError(Exception):
    """A credential is missing, ambiguous or malformed. The message never holds a secret."""


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
    return Credential(
        id=str(entry.get("id") or ""),
        name=str(entry.get("name") or ""),
        type=ctype,
        data=dict(data),
    )


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
