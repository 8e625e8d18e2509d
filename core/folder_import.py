"""A workflows folder imported at every start (`mini-n8n up`'s ./workflows or the bundled
examples, the api's MINI_N8N_WORKFLOWS_DIR), without undoing what people did since.

Each workflow of the folder is compared with the stored one of its id:
- none stored: imported and activated, and its new `versionId` noted in the `imports` hash;
- none stored, but one was imported before: it was deleted since, and stays deleted;
- stored with the file's content: left as it is (nothing written, so an editor tab that has it
  open can still save);
- stored as it was imported (its `versionId` is the one noted) but the file changed: the file's
  version replaces it, keeping its active state;
- otherwise someone changed it since (a save in the editor or over REST gives a new versionId):
  it is kept, and the line says how to take the file's version instead (`mini-n8n import`).
Every workflow gets one line saying which. A workflow without an id gets one named after its
file and place in it, so a restart finds it again instead of importing a copy."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from core.workflow_store import ActivationError, VersionConflict, WorkflowStore

# What a store adds to a workflow or changes on every save: not part of what a file says.
_NOT_CONTENT = ("id", "versionId", "active")


def import_folder(store: WorkflowStore, folder: str | Path) -> Iterator[str]:
    """Every *.json file of `folder`, in name order; a bad file is skipped and said so."""
    for path in sorted(Path(folder).glob("*.json")):
        try:
            data = json.loads(path.read_text())
            items = data if isinstance(data, list) else [data]
            for index, item in enumerate(items):
                yield from _import_one(store, path, index, item)
        except (ValueError, ActivationError) as err:  # invalid JSON or workflow
            yield f"skipped {path.name}: {err}"


def _import_one(store: WorkflowStore, path: Path, index: int, item: Any) -> Iterator[str]:
    if not isinstance(item, dict):
        raise ValueError("not a workflow object")
    item = dict(item)
    item.pop("active", None)  # activation is the store's to decide, as on a first import
    item["id"] = str(item.get("id") or _file_id(path, index))
    workflow_id = item["id"]
    stored = store.get_json(workflow_id)
    noted = store.client.hget(store.keys.imports(), workflow_id)
    name = f'"{item.get("name") or workflow_id}" ({workflow_id})'
    take_file = f"`mini-n8n import {path}` imports the file over it"
    if stored is None and noted is not None:
        yield f"not imported {name} again: it was deleted since its import ({take_file})"
    elif stored is None:
        workflow = store.save(item)
        _note(store, workflow_id)
        yield f'imported "{workflow.name}" as {workflow.id}'
        yield from (f"warning: {warning}" for warning in store.activate(workflow.id))
        yield f"activated {workflow.id}"
    elif _content(stored) == _content(item):
        if noted != stored.get("versionId"):
            _note(store, workflow_id)
        yield f"unchanged: {name}"
    elif noted is not None and _replace(store, item, noted):
        yield f"updated {name} from {path.name}"
    else:
        yield f"kept {name} as it was changed after its import; {take_file}"


def _replace(store: WorkflowStore, item: dict[str, Any], noted: str) -> bool:
    """Save the file's version over the stored one if that is still the version imported
    (checked in the save's own transaction)."""
    try:
        store.save(item, expected_version=noted)
    except VersionConflict:  # changed since its import, or just now
        return False
    _note(store, item["id"])
    return True


def _note(store: WorkflowStore, workflow_id: str) -> None:
    """Remember the versionId the workflow has now as the one this import left."""
    data = store.get_json(workflow_id)
    if data is not None:
        store.client.hset(store.keys.imports(), workflow_id, str(data.get("versionId") or ""))


def _content(workflow: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in workflow.items() if k not in _NOT_CONTENT}


def _file_id(path: Path, index: int) -> str:
    """A stable id for a workflow its file gives none (16 hex digits, like n8n's ids' length)."""
    return hashlib.sha1(f"{path.name}#{index}".encode()).hexdigest()[:16]
