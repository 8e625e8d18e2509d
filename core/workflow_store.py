"""Workflows in Redis: `workflow:<id>` (JSON with "active"), the `workflows` id set, and the
`webhooks` hash that maps "<METHOD> <path>" to the active workflow listening there.

The store knows workflows only as JSON plus what `parse` makes of it (the engine's load_workflow,
lent by whoever builds the store): an id, the raw JSON, the webhook routes its triggers listen
on and the warnings worth showing when it is activated. A workflow that cannot be parsed raises a
ValueError (the engine's WorkflowValidationError is one) and is never stored."""

from __future__ import annotations

import builtins
import hashlib
import json
import logging
import secrets
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from redis.exceptions import WatchError

from core.jsontext import dumps
from core.keys import Keys

log = logging.getLogger("mini_n8n.workflows")

# The methods a webhook can listen on (HEAD is answered as GET, OPTIONS by the api itself).
WEBHOOK_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")


class StoredWorkflow(Protocol):
    id: str
    name: str
    raw: dict[str, Any]

    def webhook_routes(self) -> list[tuple[str, str]]:
        """(METHOD, path) of every webhook its enabled triggers listen on."""
        ...

    def activation_warnings(self, queue_mode: bool) -> list[str]: ...


class WorkflowNotFound(Exception):
    pass


class ActivationError(Exception):
    pass


class VersionConflict(Exception):
    """A save named a `versionId` that is no longer the stored one: someone saved in between."""


# A webhook's route and its workflow in one round trip (one Redis; a cluster takes two): the
# ids HMGET finds for each method, then the JSON of the one at ARGV[1]'s index (false if none).
# KEYS: webhooks; ARGV: index of the method wanted, the workflow key's prefix, fields...
_ROUTE = """
local ids = redis.call('HMGET', KEYS[1], unpack(ARGV, 3))
local chosen = ids[tonumber(ARGV[1])]
local raw = false
if chosen then raw = redis.call('GET', ARGV[2] .. chosen) end
return {raw, ids}
"""


# Webhook routes an api remembers (found ones only: a path is a request's to choose).
MAX_ROUTES = 1024


@dataclass(frozen=True, slots=True)
class RouteCheck:
    """What a remembered route assumed: the webhooks hash maps `field` to `workflow_id`, whose
    stored JSON has this SHA-1 (`redis.sha1hex` in a script checks it where the execution is
    created, in the same step: core/execution_transitions.py `create`)."""

    field: str
    workflow_id: str
    digest: str


class Route(NamedTuple):
    workflow_id: str | None  # the active workflow listening for the method on the path
    allowed: list[str]  # the methods the path answers
    found: tuple[dict[str, Any], Any] | None  # its JSON and parsed workflow
    check: RouteCheck | None  # a remembered route's assumption; None: read just now


class WorkflowStore:
    def __init__(self, client, keys: Keys, parse: Callable[[Any], StoredWorkflow]):
        self.client = client
        self.keys = keys
        self.parse = parse
        self._parsed: dict[str, tuple[str, Any, str]] = {}  # id -> raw text, parsed, its SHA-1
        self._lock = threading.Lock()
        self._route = None if keys.cluster else client.register_script(_ROUTE)
        self._routes: dict[tuple[str, str], Route] = {}

    # --- CRUD -----------------------------------------------------------------------------
    def save(self, data: dict[str, Any], expected_version: str | None = None) -> Any:
        """Validate and store a workflow (an n8n export as it is). Keeps it active if it was.

        Each save over a stored one is a new version (a fresh `versionId`; a first save keeps the
        one it brings, as an import does). With `expected_version` (the versionId the caller
        edited) the save happens only if that is still the stored one, checked and written in
        one Redis transaction; else VersionConflict."""
        data = dict(data)
        data["id"] = str(data.get("id") or secrets.token_hex(8))
        key = self.keys.workflow(data["id"])
        with self.client.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(key)
                raw = pipe.get(key)
                existing = json.loads(raw) if raw else None
                stale = existing is not None and existing.get("versionId") != expected_version
                if expected_version is not None and stale:
                    raise VersionConflict(data["id"])
                data["active"] = bool(existing and existing.get("active"))
                if existing is not None or not data.get("versionId"):
                    data["versionId"] = str(uuid.uuid4())
                workflow = self.parse(data)
                if data["active"]:
                    self._check_conflicts(workflow)
                pipe.multi()
                pipe.set(key, dumps(data))
                pipe.sadd(self.keys.workflows(), workflow.id)
                if data["active"]:
                    self._unregister(pipe, existing)
                    self._register(pipe, workflow)
                pipe.execute()
            except WatchError:  # written between our read and our write
                raise VersionConflict(data["id"]) from None
        self.forget_routes()
        return workflow

    def get_json(self, workflow_id: str) -> dict[str, Any] | None:
        raw = self.client.get(self.keys.workflow(workflow_id))
        return json.loads(raw) if raw else None

    def load(self, workflow_id: str) -> tuple[dict[str, Any], Any]:
        """The stored JSON and its parsed workflow, parsed once per version."""
        return self._loaded(workflow_id, self.client.get(self.keys.workflow(workflow_id)))

    def parsed(self, workflow_id: str, stored: str | None) -> tuple[dict[str, Any], Any]:
        """`load` of the JSON a caller read itself, beside reads of its own in one round trip
        (the Chat Hub's, api/hub/messages.py)."""
        return self._loaded(workflow_id, stored)

    def _loaded(self, workflow_id: str, raw: str | None) -> tuple[dict[str, Any], Any]:
        return self._parsed_version(workflow_id, raw)[1:]

    def _parsed_version(self, workflow_id: str, raw: str | None) -> tuple[str, dict[str, Any], Any]:
        """(SHA-1 of the stored JSON, the JSON, the parsed workflow), parsed once per version."""
        if raw is None:
            raise WorkflowNotFound(workflow_id)
        with self._lock:
            cached = self._parsed.get(workflow_id)
        if cached and cached[0] == raw:
            return cached[2], cached[1].raw, cached[1]
        workflow = self.parse(json.loads(raw))
        digest = _digest(raw)
        with self._lock:
            self._parsed[workflow_id] = (raw, workflow, digest)
        return digest, workflow.raw, workflow

    def list(self) -> list[dict[str, Any]]:
        ids = sorted(self.client.smembers(self.keys.workflows()))
        raws = self.client.mget([self.keys.workflow(i) for i in ids]) if ids else []
        return [json.loads(r) for r in raws if r]

    def delete(self, workflow_id: str) -> None:
        data = self.get_json(workflow_id)
        if data is None:
            raise WorkflowNotFound(workflow_id)
        pipe = self.client.pipeline(transaction=True)
        self._unregister(pipe, data)
        pipe.delete(self.keys.workflow(workflow_id))
        pipe.srem(self.keys.workflows(), workflow_id)
        pipe.execute()
        self.forget_routes()

    # --- files ----------------------------------------------------------------------------
    # Below `def list`, a bare `list` in an annotation names that method: spelled builtins.list.
    def import_file(self, path: str | Path, activate: bool = False) -> builtins.list[str]:
        """Import one file (a workflow object or a list of them) over what is stored: `mini-n8n
        import`. A folder imported at every start is core/folder_import.py's. Returns lines to
        print."""
        data = json.loads(Path(path).read_text())
        lines = []
        for item in data if isinstance(data, list) else [data]:
            workflow = self.save(item)
            lines.append(f'imported "{workflow.name}" as {workflow.id}')
            if activate:
                lines.extend(f"warning: {warning}" for warning in self.activate(workflow.id))
                lines.append(f"activated {workflow.id}")
        return lines

    # --- activation -----------------------------------------------------------------------
    def activate(self, workflow_id: str, queue_mode: bool = True) -> builtins.list[str]:
        """Register the workflow's webhooks. Returns warnings worth showing the user."""
        data = self.get_json(workflow_id)
        if data is None:
            raise WorkflowNotFound(workflow_id)
        workflow = self.parse(data)
        if not workflow.webhook_routes():
            raise ActivationError("the workflow has no trigger node that can be activated")
        self._check_conflicts(workflow)
        data["active"] = True
        pipe = self.client.pipeline(transaction=True)
        self._unregister(pipe, data)
        self._register(pipe, workflow)
        pipe.set(self.keys.workflow(workflow_id), dumps(data))
        pipe.execute()
        self.forget_routes()
        warnings = workflow.activation_warnings(queue_mode)
        for warning in warnings:
            log.warning(warning)
        return warnings

    def deactivate(self, workflow_id: str) -> None:
        data = self.get_json(workflow_id)
        if data is None:
            raise WorkflowNotFound(workflow_id)
        data["active"] = False
        pipe = self.client.pipeline(transaction=True)
        self._unregister(pipe, data)
        pipe.set(self.keys.workflow(workflow_id), dumps(data))
        pipe.execute()
        self.forget_routes()

    # --- webhook lookup -------------------------------------------------------------------
    def lookup(self, method: str, path: str) -> tuple[str | None, builtins.list[str]]:
        """(workflow id for METHOD on path, methods the path answers), in one round trip."""
        fields = [_field(m, path) for m in WEBHOOK_METHODS]
        found = dict(
            zip(WEBHOOK_METHODS, self.client.hmget(self.keys.webhooks(), fields), strict=True)
        )
        allowed = [m for m, wid in found.items() if wid]
        return found.get(method.upper()), allowed

    def route(self, method: str, path: str, remembered: bool = False) -> Route:
        """The route as `lookup` finds it and its workflow as `load` loads it. `remembered`: a
        route found before may be answered from memory, with the RouteCheck of what it assumed,
        for the execution's create to confirm in its own step."""
        method = method.upper()
        hit = self.remembered_route(method, path) if remembered else None
        if hit is not None:
            return hit
        if self._route is None:
            workflow_id, allowed = self.lookup(method, path)
            loaded = None if workflow_id is None else self.load(workflow_id)
            return Route(workflow_id, allowed, loaded, None)
        fields = [_field(m, path) for m in WEBHOOK_METHODS]
        wanted = WEBHOOK_METHODS.index(method) + 1 if method in WEBHOOK_METHODS else 0
        raw, ids = self._route(keys=[self.keys.webhooks()],
                               args=[wanted, self.keys.workflow(""), *fields])  # fmt: skip
        found = dict(zip(WEBHOOK_METHODS, ids, strict=True))
        allowed = [m for m, wid in found.items() if wid]
        workflow_id = found.get(method)
        if workflow_id is None:
            return Route(None, allowed, None, None)
        digest, data, workflow = self._parsed_version(workflow_id, raw)
        check = RouteCheck(_field(method, path), workflow_id, digest)
        with self._lock:
            if len(self._routes) >= MAX_ROUTES:
                self._routes.clear()
            self._routes[(method, path)] = Route(workflow_id, allowed, (data, workflow), check)
        return Route(workflow_id, allowed, (data, workflow), None)

    def remembered_route(self, method: str, path: str) -> Route | None:
        """The route found before, from memory only (no round trip), or None."""
        with self._lock:
            return self._routes.get((method.upper(), path))

    def forget_routes(self) -> None:
        """Routes remembered are read again (a route turned out stale, or this process changed
        a workflow)."""
        with self._lock:
            self._routes.clear()

    def confirm(self, check: RouteCheck) -> bool:
        """Whether a remembered route still holds, for an answer that created no execution."""
        pipe = self.client.pipeline(transaction=False)
        pipe.hget(self.keys.webhooks(), check.field)
        pipe.get(self.keys.workflow(check.workflow_id))
        owner, raw = pipe.execute()
        return owner == check.workflow_id and raw is not None and _digest(raw) == check.digest

    def _register(self, pipe, workflow: StoredWorkflow) -> None:
        for method, path in workflow.webhook_routes():
            pipe.hset(self.keys.webhooks(), _field(method, path), workflow.id)

    def _unregister(self, pipe, data: dict[str, Any] | None) -> None:
        if not data:
            return
        try:
            old = self.parse(data)
        except ValueError:
            return
        for method, path in old.webhook_routes():
            pipe.hdel(self.keys.webhooks(), _field(method, path))

    def _check_conflicts(self, workflow: StoredWorkflow) -> None:
        routes = workflow.webhook_routes()
        if not routes:
            return
        owners = self.client.hmget(self.keys.webhooks(), [_field(m, p) for m, p in routes])
        for (method, path), owner in zip(routes, owners, strict=True):
            if owner and owner != workflow.id:
                raise ActivationError(
                    f'{method} /webhook/{path} is already used by workflow "{owner}"'
                )


def _digest(raw: str) -> str:
    """The SHA-1 Redis's `redis.sha1hex` gives the stored JSON (core/execution_transitions.py `create`)."""
    return hashlib.sha1(raw.encode()).hexdigest()


def _field(method: str, path: str) -> str:
    return f"{method.upper()} {path}"
