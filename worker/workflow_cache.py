"""The workflows one worker has loaded, by id: every task carries its workflow's snapshot, and
parsing and validating it is cheap but not free, while the same snapshot comes back often."""

from __future__ import annotations

import json
from typing import Any

from engine.workflow import Workflow, load_workflow


class WorkflowCache:
    def __init__(self) -> None:
        # One entry per workflow id: a changed workflow replaces its older snapshot.
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
