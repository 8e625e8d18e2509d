"""The workflow model: n8n's JSON (nodes + connections), validated when loaded.

Loading never runs anything. Every problem is reported as a WorkflowValidationError naming the
node, so a bad import fails at import time and not at the first chat message.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from engine.description import check_parameters, slot_name
from engine.errors import WorkflowValidationError
from engine.node import AI_CONNECTION_TYPES, NodeType
from engine.registry import get_node_type
from engine.webhooks import workflow_webhooks

CONNECTION_TYPES = ("main", *AI_CONNECTION_TYPES)
# Node types that only decorate the canvas; an export carries them and they never run.
IGNORED_TYPES = {"n8n-nodes-base.stickyNote"}


@dataclass
class Node:
    id: str
    name: str
    type: str
    type_version: float
    position: list[float]
    parameters: dict[str, Any]
    credentials: dict[str, Any] = field(default_factory=dict)
    webhook_id: str | None = None
    disabled: bool = False

    @classmethod
    def from_json(cls, data: Any, index: int) -> Node:
        if not isinstance(data, dict):
            raise WorkflowValidationError(f"nodes[{index}] is not an object")
        name = data.get("name")
        if not isinstance(name, str) or not name:
            raise WorkflowValidationError(f"nodes[{index}] has no name")
        node_type = data.get("type")
        if not isinstance(node_type, str) or not node_type:
            raise WorkflowValidationError("node has no type", node=name)
        parameters = data.get("parameters") or {}
        if not isinstance(parameters, dict):
            raise WorkflowValidationError("parameters must be an object", node=name)
        credentials = data.get("credentials") or {}
        if not isinstance(credentials, dict):
            raise WorkflowValidationError("credentials must be an object", node=name)
        return cls(
            id=str(data.get("id") or name),
            name=name,
            type=node_type,
            type_version=float(data.get("typeVersion") or 1),
            position=list(data.get("position") or [0, 0]),
            parameters=parameters,
            credentials=credentials,
            webhook_id=data.get("webhookId"),
            disabled=bool(data.get("disabled", False)),
        )


@dataclass(frozen=True)
class Connection:
    source: str
    source_output: int
    type: str
    target: str
    target_input: int


@dataclass
class Workflow:
    id: str
    name: str
    nodes: dict[str, Node]
    connections: list[Connection]
    types: dict[str, NodeType]  # node name -> its node type
    active: bool = False
    settings: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)

    def node_type(self, name: str) -> NodeType:
        return self.types[name]

    def main_children(self, name: str, output: int) -> list[Connection]:
        return [
            c
            for c in self.connections
            if c.source == name and c.type == "main" and c.source_output == output
        ]

    def main_parents(self, name: str) -> list[Connection]:
        return [c for c in self.connections if c.target == name and c.type == "main"]

    def main_input_count(self, name: str) -> int:
        """Main input slots connected to `name`: the highest connected index + 1 (n8n's
        connectionsByDestinationNode[name].main.length)."""
        return max((c.target_input + 1 for c in self.main_parents(name)), default=0)

    def main_ancestors(self, name: str) -> set[str]:
        """Every node upstream of `name` along main connections."""
        seen: set[str] = set()
        todo = [c.source for c in self.main_parents(name)]
        while todo:
            parent = todo.pop()
            if parent not in seen:
                seen.add(parent)
                todo += [c.source for c in self.main_parents(parent)]
        return seen

    def sub_nodes(self, name: str, connection_type: str) -> list[Node]:
        """Sub-nodes plugged into `name` through `connection_type`, in connection order."""
        return [
            self.nodes[c.source]
            for c in self.connections
            if c.target == name and c.type == connection_type
        ]

    def triggers(self) -> list[Node]:
        return [n for n in self.nodes.values() if self.types[n.name].kind == "trigger"]

    def webhook_routes(self) -> list[tuple[str, str]]:
        """(METHOD, path) of every webhook the enabled triggers listen on."""
        return [(spec.method, spec.path) for _, spec in workflow_webhooks(self)]

    def activation_warnings(self, queue_mode: bool) -> list[str]:
        """What its nodes want the user to know when it is activated (once per node type)."""
        warnings: dict[str, None] = {}
        for node in self.nodes.values():
            warning = self.types[node.name].activation_warning(node, queue_mode)
            if warning:
                warnings[f'Workflow "{self.name}": {warning}'] = None
        return list(warnings)

    def to_json(self) -> dict[str, Any]:
        data = copy.deepcopy(self.raw)
        data["id"] = self.id
        data["name"] = self.name
        data["active"] = self.active
        return data


def load_workflow(data: Any, max_nodes: int | None = None) -> Workflow:
    """Parse and validate an n8n workflow export (or our stored form of one). With `max_nodes`
    (MINI_N8N_MAX_NODES, where workflows are imported or activated) a longer one is refused
    before anything else is looked at: running it would cost per node and per connection."""
    if not isinstance(data, dict):
        raise WorkflowValidationError("a workflow must be a JSON object")
    raw_nodes = data.get("nodes")
    if not isinstance(raw_nodes, list):
        raise WorkflowValidationError('a workflow needs a "nodes" list')
    if max_nodes is not None and len(raw_nodes) > max_nodes:
        raise WorkflowValidationError(
            f"the workflow has {len(raw_nodes):,} nodes; at most {max_nodes:,} are allowed "
            "(MINI_N8N_MAX_NODES)"
        )
    nodes: dict[str, Node] = {}
    types: dict[str, NodeType] = {}
    for index, raw in enumerate(raw_nodes):
        node = Node.from_json(raw, index)
        if node.type in IGNORED_TYPES:
            continue
        if node.name in nodes:
            raise WorkflowValidationError("two nodes share this name", node=node.name)
        node_type = get_node_type(node.type)
        if node_type is None:
            raise WorkflowValidationError(f'unknown node type "{node.type}"', node=node.name)
        nodes[node.name] = node
        types[node.name] = node_type
    connections = _parse_connections(data.get("connections") or {}, nodes)
    settings = data.get("settings")
    workflow = Workflow(
        id=str(data.get("id") or ""),
        name=str(data.get("name") or "My workflow"),
        nodes=nodes,
        connections=connections,
        types=types,
        active=bool(data.get("active", False)),
        settings=settings if isinstance(settings, dict) else {},
        raw=copy.deepcopy(data),
    )
    _check_sub_nodes(workflow)
    for node in nodes.values():
        if not node.disabled:
            check_parameters(
                types[node.name].description, node.parameters, node.name, node.type_version
            )
            types[node.name].validate(node)
            types[node.name].validate_in(node, workflow)
    return workflow


def _parse_connections(raw: Any, nodes: dict[str, Node]) -> list[Connection]:
    if not isinstance(raw, dict):
        raise WorkflowValidationError('"connections" must be an object')
    result = []
    for source, by_type in raw.items():
        if source not in nodes:
            if _is_ignored_source(source, by_type):
                continue
            raise WorkflowValidationError("connection from a node that does not exist", node=source)
        if not isinstance(by_type, dict):
            raise WorkflowValidationError("connections must be an object by type", node=source)
        for conn_type, outputs in by_type.items():
            if conn_type not in CONNECTION_TYPES:
                raise WorkflowValidationError(
                    f'unsupported connection type "{conn_type}"', node=source
                )
            for output_index, targets in enumerate(outputs or []):
                for target in targets or []:
                    result.append(_connection(source, output_index, conn_type, target, nodes))
    return result


def _is_ignored_source(source: str, by_type: Any) -> bool:
    # An export may keep empty connection entries for sticky notes or deleted nodes.
    return not any(any(outs or []) for outs in (by_type or {}).values())


def _connection(
    source: str, output_index: int, conn_type: str, target: Any, nodes: dict[str, Node]
) -> Connection:
    if not isinstance(target, dict) or not isinstance(target.get("node"), str):
        raise WorkflowValidationError("malformed connection target", node=source)
    name = target["node"]
    if name not in nodes:
        raise WorkflowValidationError(f'connection to unknown node "{name}"', node=source)
    target_type = target.get("type", conn_type)
    if target_type != conn_type:
        raise WorkflowValidationError(
            f'connection type "{conn_type}" ends at an input of type "{target_type}"', node=source
        )
    return Connection(source, output_index, conn_type, name, int(target.get("index", 0)))


def _check_sub_nodes(workflow: Workflow) -> None:
    for conn in workflow.connections:
        if conn.type == "main":
            continue
        source_type = workflow.types[conn.source]
        target_type = workflow.types[conn.target]
        # Named as the canvas names them ("Chat Model"), not by connection type.
        if source_type.sub_output != conn.type:
            supplies = source_type.sub_output
            what = f'a "{slot_name(supplies)}"' if supplies else "no sub-node"
            raise WorkflowValidationError(
                f'cannot be the "{slot_name(conn.type)}" of "{conn.target}": it is {what}',
                node=conn.source,
            )
        if conn.type not in target_type.sub_inputs:
            raise WorkflowValidationError(
                f'has no "{slot_name(conn.type)}" input (for "{conn.source}")', node=conn.target
            )
    for node in workflow.nodes.values():
        for conn_type, spec in workflow.types[node.name].sub_inputs.items():
            count = len(workflow.sub_nodes(node.name, conn_type))
            if spec.required and count == 0 and not node.disabled:
                raise WorkflowValidationError(
                    f'no node connected to required input "{spec.display_name}"', node=node.name
                )  # n8n's words for this issue
            if spec.max_connections is not None and count > spec.max_connections:
                raise WorkflowValidationError(
                    f"takes at most {spec.max_connections} sub-node(s) at its "
                    f'"{spec.display_name}" input',
                    node=node.name,
                )
