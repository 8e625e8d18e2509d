"""Workflows in Redis: `workflow:<id>` (JSON with "active"), the `workflows` id set, and the
`webhooks` hash that maps "<METHOD> <path>" to the active workflow listening there."""

from __future__ import annotations

import json
import logging
import secrets
import threading
from typing import Any

from core.jsontext import dumps
from engine.errors import WorkflowValidationError
from engine.webhooks import WebhookSpec, workflow_webhooks
from engine.workflow import Workflow, load_workflow
from mini_n8n.keys import Keys

log = logging.getLogger("mini_n8n.workflows")

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")
SIMPLE_MEMORY = "@n8n/n8n-nodes-langchain.memoryBufferWindow"


class WorkflowNotFound(Exception):
    pass


class ActivationError(Exception):
    pass


class WorkflowStore:
    def __init__(self, client, keys: Keys):
        self.client = client
        self.keys = keys
        self._parsed: dict[str, tuple[str, Workflow]] = {}
        self._lock = threading.Lock()

    # --- CRUD -----------------------------------------------------------------------------
    def save(self, data: dict[str, Any]) -> Workflow:
        """Validate and store a workflow (an n8n export as it is). Keeps it active if it was."""
        data = dict(data)
        data["id"] = str(data.get("id") or secrets.token_hex(8))
        existing = self.get_json(data["id"])
        data["active"] = bool(existing and existing.get("active"))
        workflow = load_workflow(data)
        if data["active"]:
            self._check_conflicts(workflow)
        pipe = self.client.pipeline(transaction=True)
        pipe.set(self.keys.workflow(workflow.id), dumps(data))
        pipe.sadd(self.keys.workflows(), workflow.id)
        if data["active"]:
            self._unregister(pipe, existing)
            self._register(pipe, workflow)
        pipe.execute()
        return workflow

    def get_json(self, workflow_id: str) -> dict[str, Any] | None:
        raw = self.client.get(self.keys.workflow(workflow_id))
        return json.loads(raw) if raw else None

    def load(self, workflow_id: str) -> tuple[dict[str, Any], Workflow]:
        """The stored JSON and its parsed workflow, parsed once per version."""
        raw = self.client.get(self.keys.workflow(workflow_id))
        if raw is None:
            raise WorkflowNotFound(workflow_id)
        with self._lock:
            cached = self._parsed.get(workflow_id)
        if cached and cached[0] == raw:
            return cached[1].raw, cached[1]
        workflow = load_workflow(json.loads(raw))
        with self._lock:
            self._parsed[workflow_id] = (raw, workflow)
        return workflow.raw, workflow

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

    # --- activation -----------------------------------------------------------------------
    def activate(self, workflow_id: str, queue_mode: bool = True) -> list[str]:
        """Register the workflow's webhooks. Returns warnings worth showing the user."""
        data = self.get_json(workflow_id)
        if data is None:
            raise WorkflowNotFound(workflow_id)
        workflow = load_workflow(data)
        specs = workflow_webhooks(workflow)
        if not specs:
            raise ActivationError("the workflow has no trigger node that can be activated")
        self._check_conflicts(workflow)
        data["active"] = True
        pipe = self.client.pipeline(transaction=True)
        self._unregister(pipe, data)
        self._register(pipe, workflow)
        pipe.set(self.keys.workflow(workflow_id), dumps(data))
        pipe.execute()
        warnings = []
        if queue_mode and any(n.type == SIMPLE_MEMORY for n in workflow.nodes.values()):
            from engine.nodes.memory_buffer_window import QUEUE_MODE_WARNING

            warnings.append(f'Workflow "{workflow.name}": {QUEUE_MODE_WARNING}')
            log.warning(warnings[-1])
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

    # --- webhook lookup -------------------------------------------------------------------
    def lookup(self, method: str, path: str) -> tuple[str | None, list[str]]:
        """(workflow id for METHOD on path, methods the path answers), in one round trip."""
        fields = [_field(m, path) for m in METHODS]
        found = dict(zip(METHODS, self.client.hmget(self.keys.webhooks(), fields), strict=True))
        allowed = [m for m, wid in found.items() if wid]
        return found.get(method.upper()), allowed

    def _register(self, pipe, workflow: Workflow) -> None:
        for _, spec in workflow_webhooks(workflow):
            pipe.hset(self.keys.webhooks(), _field(spec.method, spec.path), workflow.id)

    def _unregister(self, pipe, data: dict[str, Any] | None) -> None:
        if not data:
            return
        try:
            old = load_workflow(data)
        except WorkflowValidationError:
            return
        for _, spec in workflow_webhooks(old):
            pipe.hdel(self.keys.webhooks(), _field(spec.method, spec.path))

    def _check_conflicts(self, workflow: Workflow) -> None:
        specs: list[WebhookSpec] = [spec for _, spec in workflow_webhooks(workflow)]
        if not specs:
            return
        owners = self.client.hmget(self.keys.webhooks(), [_field(s.method, s.path) for s in specs])
        for spec, owner in zip(specs, owners, strict=True):
            if owner and owner != workflow.id:
                raise ActivationError(
                    f'{spec.method} /webhook/{spec.path} is already used by workflow "{owner}"'
                )


def _field(method: str, path: str) -> str:
    return f"{method.upper()} {path}"
