"""How trigger nodes describe the webhooks they listen on (pure data; the api serves them)."""

from __future__ import annotations

from dataclasses import dataclass

RESPONSE_MODES = ("onReceived", "lastNode", "responseNode", "streaming")


@dataclass(frozen=True)
class WebhookSpec:
    method: str  # GET, POST, ...
    path: str  # without leading slash, under /webhook/
    response_mode: str  # one of RESPONSE_MODES


def workflow_webhooks(workflow) -> list[tuple[str, WebhookSpec]]:
    """(trigger node name, spec) for every webhook of the workflow's enabled triggers."""
    found = []
    for node in workflow.triggers():
        if node.disabled:
            continue
        node_type = workflow.node_type(node.name)
        for spec in getattr(node_type, "webhooks", lambda n: [])(node):
            found.append((node.name, spec))
    return found
