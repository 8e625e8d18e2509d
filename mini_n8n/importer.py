"""Importing workflow files (n8n exports) into Redis, optionally activating them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from api.workflow_store import ActivationError, WorkflowStore
from engine.errors import WorkflowValidationError


def import_file(store: WorkflowStore, path: str | Path, activate: bool = False) -> list[str]:
    """Import one file (a workflow object or a list of them). Returns lines to print."""
    data = json.loads(Path(path).read_text())
    lines = []
    for item in data if isinstance(data, list) else [data]:
        workflow = store.save(item)
        lines.append(f'imported "{workflow.name}" as {workflow.id}')
        if activate:
            for warning in store.activate(workflow.id):
                lines.append(f"warning: {warning}")
            lines.append(f"activated {workflow.id}")
    return lines


def import_directory(
    store: WorkflowStore, directory: str | Path, activate: bool = False
) -> Iterator[str]:
    for path in sorted(Path(directory).glob("*.json")):
        try:
            yield from import_file(store, path, activate)
        except (ValueError, WorkflowValidationError, ActivationError) as err:
            yield f"skipped {path.name}: {err}"
