"""The workflows one worker has loaded, by id: a task names its workflow's version (a snapshot
reference, core/workflow_snapshots.py) or, from an older api, carries its JSON; parsing and
validating a version is cheap but not free, while the same version comes back often."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from engine.workflow import Workflow, load_workflow


class SnapshotGone(LookupError):
    pass


class WorkflowCache:
    def __init__(self) -> None:
        # One entry per workflow id: a changed workflow replaces its older version.
        self._loaded: dict[str, tuple[str, Workflow]] = {}

    def get(self, data: dict[str, Any]) -> Workflow:
        """The loaded workflow of this snapshot (EngineError if it is invalid)."""
        raw = json.dumps(data, sort_keys=True)
        workflow_id = data.get("id", "")
        cached = self._loaded.get(workflow_id)
        if cached and cached[0] == raw:
            return cached[1]
        workflow = load_workflow(data)
        self._loaded[workflow_id] = (raw, workflow)
        return workflow

    def put_ref(self, ref: dict[str, str], workflow: Workflow) -> None:
        """File a version loaded ahead of its first task (warm start)."""
        self._loaded[ref["id"]] = (f"digest:{ref['digest']}", workflow)

    def get_ref(
        self, ref: dict[str, str], read: Callable[[dict[str, str]], dict[str, Any] | None]
    ) -> Workflow:
        """The loaded workflow of a referenced version, read with `read` on first sight."""
        version = f"digest:{ref['digest']}"
        cached = self._loaded.get(ref["id"])
        if cached and cached[0] == version:
            return cached[1]
        data = read(ref)
        if data is None:
            raise SnapshotGone("the workflow version this execution was started with is gone")
        workflow = load_workflow(data)
        self._loaded[ref["id"]] = (version, workflow)
        return workflow
