"""How trigger nodes describe the webhooks they listen on (pure data; the api serves them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.workflow import Workflow

RESPONSE_MODES = ("onReceived", "lastNode", "responseNode", "streaming")


@dataclass(frozen=True)
class WebhookSpec:
    method: str  # GET, POST, ...
    path: str  # without leading slash, under /webhook/
    response_mode: str  # one of RESPONSE_MODES


def workflow_webhooks(workflow: Workflow) -> list[tuple[str, WebhookSpec]]:
    """(trigger node name, spec) for every webhook of the workflow's enabled triggers."""
    found = []
    for node in workflow.triggers():
        if node.disabled:
            continue
        for spec in workflow.node_type(node.name).webhooks(node):
            found.append((node.name, spec))
    return found
