"""An expression's value against an execution's run data: the editor's parameter preview.

The editor shows `={{ $json.sessionId }}` next to what it evaluated to in the node's last run.
The expression is evaluated by the engine's own evaluator (engine/expressions.py), on the item
the node read: a main node's input (the output of the node before it), a sub-node's is the item
of the node it serves (as `supply_data` resolves its parameters), a trigger's its own output.
"""

from __future__ import annotations

from typing import Any

from engine import expression_values as js
from engine.errors import ExpressionError
from engine.expression_budget import Checkpoint, json_size
from engine.expressions import ExpressionData, evaluate
from engine.workflow import Workflow

Runs = dict[str, list[dict[str, Any]]]  # runData: node name -> its runs
# A preview is shown beside a parameter: its JSON need not be as large as a node's result may.
MAX_PREVIEW_CHARACTERS = 1_000_000


def preview(
    expression: str,
    workflow: Workflow,
    run_data: Runs,
    node_name: str,
    checkpoint: Checkpoint | None = None,
) -> Any:
    """The value of `expression` for `node_name` (ExpressionError if it cannot be evaluated).
    `checkpoint` is called every few thousand steps (the api lets other requests run)."""
    node = workflow.nodes[node_name]

    def node_items(name: str) -> list[dict] | None:
        return _output(run_data, name)

    items = _input(workflow, run_data, node_name, set())
    value = evaluate(
        expression,
        ExpressionData(
            json=items[0].get("json", {}) if items else {},
            parameters=node.parameters,
            node_items=node_items,
            input_items=items,
            workflow={"id": workflow.id, "name": workflow.name, "active": workflow.active},
            checkpoint=checkpoint,
        ),
    )
    size = json_size(value, 0, js.json_scalar_size)
    if size > MAX_PREVIEW_CHARACTERS:
        raise ExpressionError(
            f"the value is too large to preview ({size:,} > {MAX_PREVIEW_CHARACTERS:,} "
            "characters as JSON)",
            expression=expression[:200],
        )
    return value


def _output(run_data: Runs, name: str) -> list[dict] | None:
    runs = run_data.get(name) or []
    if not runs:
        return None
    main = (runs[-1].get("data") or {}).get("main") or [[]]
    return main[0] or []


def _input(workflow: Workflow, run_data: Runs, name: str, seen: set[str]) -> list[dict]:
    if name in seen:
        return []
    seen.add(name)
    served = [c.target for c in workflow.connections if c.source == name and c.type != "main"]
    if served:  # a sub-node reads the item of the node it serves
        return _input(workflow, run_data, served[0], seen)
    parents = workflow.main_parents(name)
    if parents:
        return _output(run_data, parents[0].source) or []
    return _output(run_data, name) or []  # a trigger: what it put out
