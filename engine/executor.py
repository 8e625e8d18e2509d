"""Runs a workflow's main graph in n8n's (v1) order: depth first, a node's children before its
siblings, items flowing along main connections. Sub-nodes run when the node that owns them asks.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import deque
from typing import Any

from core.clock import now_ms
from engine.context import ExecuteContext, Execution, error_json
from engine.errors import EngineError, ExecutionCanceled, NodeExecutionError
from engine.hooks import Hooks
from engine.node import Item
from engine.run_data import Run
from engine.services import Services
from engine.workflow import Node, Workflow


def run_workflow(
    workflow: Workflow,
    start_items: list[Item],
    *,
    start_node: str | None = None,
    hooks: Hooks | None = None,
    services: Services | None = None,
    execution_id: str | None = None,
    mode: str = "manual",
    streaming: bool = False,
    cancel: threading.Event | None = None,
) -> Run:
    """Execute `workflow` from its trigger with `start_items` as the trigger's output."""
    execution = Execution(
        id=execution_id or uuid.uuid4().hex,
        workflow=workflow,
        hooks=hooks or Hooks(),
        services=services or Services(),
        mode=mode,
        streaming_requested=streaming,
        cancel=cancel or threading.Event(),
    )
    start = _start_node(workflow, start_node)
    run = Run(status="success", started_at=now_ms())
    execution.hooks.run("workflowExecuteBefore", execution)
    stack: deque[tuple[Node, list[Item], str | None]] = deque([(start, start_items, None)])
    while stack:
        node, items, parent = stack.popleft()
        run.last_node = node.name
        try:
            execution.check_canceled()
            outputs = _run_node(execution, node, items, parent)
        except EngineError as err:
            _fail(execution, run, node, err)
            break
        children = []
        for output_index, output_items in enumerate(outputs):
            if not output_items:
                continue
            for conn in workflow.main_children(node.name, output_index):
                # A disabled child still runs: it passes its input through, as in n8n.
                children.append((workflow.nodes[conn.target], output_items, node.name))
        stack.extendleft(reversed(children))
    run.run_data = execution.run_data
    run.streamed = execution.streamed
    run.stopped_at = now_ms()
    execution.hooks.run("workflowExecuteAfter", execution, run)
    return run


def _start_node(workflow: Workflow, name: str | None) -> Node:
    if name:
        return workflow.nodes[name]
    triggers = workflow.triggers()
    if triggers:
        return triggers[0]
    parentless = [
        n
        for n in workflow.nodes.values()
        if workflow.node_type(n.name).kind != "sub" and not workflow.main_parents(n.name)
    ]
    if not parentless:
        raise NodeExecutionError("the workflow has no node to start from")
    return parentless[0]


def _run_node(execution: Execution, node: Node, items: list[Item], parent: str | None):
    run_index = len(execution.run_data.get(node.name, []))
    execution.hooks.run("nodeExecuteBefore", execution, node.name, run_index)
    task: dict[str, Any] = {
        "startTime": now_ms(),
        "executionIndex": execution.next_index(),
        "source": [{"previousNode": parent}] if parent else [],
    }
    started = time.monotonic()
    try:
        if node.disabled:
            outputs = [items]
        else:
            ctx = ExecuteContext(execution, node, items, run_index)
            outputs = execution.workflow.node_type(node.name).execute(ctx)
    except ExecutionCanceled as err:
        _record(execution, node, run_index, task, started, status="canceled", error=err)
        raise
    except EngineError as err:
        err.node = err.node or node.name
        _record(execution, node, run_index, task, started, status="error", error=err)
        raise
    except Exception as err:  # a bug or an unexpected library error inside a node
        wrapped = NodeExecutionError(f"{type(err).__name__}: {err}", node=node.name)
        _record(execution, node, run_index, task, started, status="error", error=wrapped)
        raise wrapped from err
    task["data"] = {"main": outputs}
    _record(execution, node, run_index, task, started, status="success")
    return outputs


def _record(execution, node, run_index, task, started, *, status, error=None) -> None:
    task["executionTime"] = int((time.monotonic() - started) * 1000)
    task["executionStatus"] = status
    if error is not None:
        task["error"] = error_json(error, node.name)
    execution.run_data.setdefault(node.name, []).append(task)
    execution.hooks.run("nodeExecuteAfter", execution, node.name, run_index, task)


def _fail(execution: Execution, run: Run, node: Node, err: EngineError) -> None:
    canceled = isinstance(err, ExecutionCanceled)
    run.status = "canceled" if canceled else "error"
    run.error = err.message
    run.error_node = err.node or node.name
    if execution.is_streaming() and not canceled:
        # n8n sends an error chunk when any node fails, so a streaming client learns why.
        execution.hooks.run(
            "sendChunk",
            {
                "type": "error",
                "content": err.message or "Unknown error",
                "metadata": {
                    "nodeId": node.id,
                    "nodeName": node.name,
                    "itemIndex": err.item_index or 0,
                    "runIndex": len(execution.run_data.get(node.name, [])) - 1,
                },
            },
        )
