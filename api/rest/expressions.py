"""The parameter panel's expression preview: evaluated by the engine on an execution's run data
(engine/preview.py), so the editor shows what the node would read."""

from __future__ import annotations

from flask import jsonify, request

from api import bodies
from api.errors import ApiError
from api.rest import bp
from api.runtime import runtime
from engine.cpu import paced
from engine.errors import ExpressionError
from engine.preview import preview
from runtime.timers import pause


@bp.post("/expressions/preview")
def preview_expression():
    body = bodies.json_object(request)
    expression, node = body.get("expression"), body.get("node")
    if not isinstance(expression, str) or not isinstance(node, str):
        raise ApiError(400, '"expression" and "node" must be strings')
    _, workflow = runtime().workflows.load(str(body.get("workflowId") or ""))
    if node not in workflow.nodes:
        raise ApiError(404, f'the workflow has no node "{node}"')
    record = runtime().executions.get(str(body.get("executionId") or ""))
    run_data = record.run_data if record is not None else {}
    try:
        # Other requests run while it evaluates: an expression may take up to its step budget.
        result = preview(expression, workflow, run_data, node, checkpoint=paced(pause))
    except ExpressionError as err:
        return jsonify({"error": str(err)})
    return jsonify({"result": result})
