"""Runs a workflow's main graph in n8n's (v1) order (engine/schedule.py): depth first, a node's
children before its siblings, items flowing along main connections, a node with several inputs
held until they came or nothing else can run. Sub-nodes run when the node that owns them asks.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

from core.clock import now_ms
from core.redis_errors import error_text
from engine.context import ExecuteContext, Execution, error_json
from engine.errors import EngineError, ExecutionCanceled, NodeExecutionError, WaitingForReply
from engine.hooks import Hooks
from engine.node import Item
from engine.run_data import Run
from engine.schedule import Frame, Schedule
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
    resume: dict[str, Any] | None = None,
) -> Run:
    """Execute `workflow` from its trigger with `start_items` as the trigger's output.

    With `resume` the execution continues where a node raised WaitingForReply; `start_items`
    is then unused. `resume` is {"state": Run.waiting of the paused run, "reply": the reply
    item} when the user replied, or {"state": ..., "reply": None, "expired": True} when the
    wait's time limit (waitTill) passed with no reply: then, as in n8n, the waiting node passes
    its input items on. A node that waits ends this call with a Run of status "waiting" whose
    `waiting` says where it stands: plain JSON, so any process can continue it."""
    execution = Execution(
        id=execution_id or uuid.uuid4().hex,
        workflow=workflow,
        hooks=hooks or Hooks(),
        services=services or Services(),
        mode=mode,
        streaming_requested=streaming,
        cancel=cancel or threading.Event(),
    )
    run = Run(status="success", started_at=now_ms())
    execution.hooks.run("workflowExecuteBefore", execution)
    schedule: Schedule | None
    if resume is None:
        schedule = Schedule(workflow)
        schedule.start(_start_node(workflow, start_node), start_items)
    else:
        schedule = _resumed(execution, run, resume)
    if schedule is not None:
        _drive(execution, run, schedule)
    run.run_data = execution.run_data
    run.streamed = execution.streamed
    run.stopped_at = now_ms()
    execution.hooks.run("workflowExecuteAfter", execution, run)
    return run


def _drive(execution: Execution, run: Run, schedule: Schedule) -> None:
    while (frame := schedule.next()) is not None:
        node = frame.node
        run.last_node = node.name
        try:
            execution.checkpoint()  # stopped, timed out or over its CPU time: ends here
            outputs = _run_node(execution, frame)
        except WaitingForReply as wait:
            run.status = "waiting"
            run.waiting = _waiting_state(execution, run, frame, schedule, wait)
            return
        except EngineError as err:
            _fail(execution, run, node, err)
            return
        schedule.add_children(node, outputs, len(execution.run_data[node.name]) - 1)


def _waiting_state(execution, run, frame: Frame, schedule: Schedule, wait) -> dict[str, Any]:
    return {
        "node": frame.node.name,
        "nodeId": frame.node.id,
        "runIndex": len(execution.run_data.get(frame.node.name, [])) - 1,
        "items": frame.items,
        "inputs": frame.inputs,
        "waitTill": wait.wait_till_ms,
        # what was queued when it paused, and the inputs held for nodes that take several
        **schedule.to_json(),
        "runData": execution.run_data,
        "executionIndex": execution.execution_index,
        "startedAt": run.started_at,
        # signature -> query of each link that may end this wait (ExecuteContext.resume_url)
        "resumeLinks": execution.resume_links,
    }


def _resumed(execution: Execution, run: Run, resume: dict[str, Any]) -> Schedule | None:
    """Put the execution back where it waited, give the waiting node its reply (its run turns
    from `waiting` to `success` with the node's resume output), and return what is left to run:
    that node's children first, then what was queued when it paused. A node may also decline
    the reply and go on waiting (a chat message to an approval that blocks user input)."""
    state, workflow = resume["state"], execution.workflow
    execution.run_data = state["runData"]
    execution.execution_index = state["executionIndex"]
    run.started_at = state.get("startedAt") or run.started_at
    schedule = Schedule.from_json(workflow, state)
    node = workflow.nodes[state["node"]]
    run.last_node = node.name
    run_index = state["runIndex"]
    task = execution.run_data[node.name][run_index]
    started = time.monotonic()
    try:
        outputs = _resume_output(execution, node, state, resume)
    except WaitingForReply:
        run.status, run.waiting = "waiting", state
        return None
    except EngineError as err:
        err.node = err.node or node.name
        task.update(executionStatus="error", error=error_json(err, node.name))
        _fail(execution, run, node, err)
        return None
    task["data"] = {"main": outputs}
    task["executionStatus"] = "success"
    task["executionTime"] = task.get("executionTime", 0) + int((time.monotonic() - started) * 1000)
    execution.hooks.run("nodeExecuteAfter", execution, node.name, run_index, task)
    schedule.add_children(node, outputs, run_index)
    return schedule


def _resume_output(execution: Execution, node: Node, state: dict[str, Any], resume) -> Any:
    if resume.get("expired"):
        # n8n resumes a wait whose time ran out with the node disabled: its input passes on.
        return [state["items"]]
    inputs = state.get("inputs") or [state["items"]]
    ctx = ExecuteContext(execution, node, inputs[0], state["runIndex"], inputs)
    return execution.workflow.node_type(node.name).resume(ctx, resume["reply"])


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


def _run_node(execution: Execution, frame: Frame):
    node = frame.node
    run_index = len(execution.run_data.get(node.name, []))
    execution.hooks.run("nodeExecuteBefore", execution, node.name, run_index)
    task: dict[str, Any] = {
        "startTime": now_ms(),
        "executionIndex": execution.next_index(),
        "source": frame.sources,
    }
    started = time.monotonic()
    try:
        if node.disabled:
            outputs = [frame.items]
        else:
            ctx = ExecuteContext(execution, node, frame.items, run_index, frame.inputs)
            outputs = execution.workflow.node_type(node.name).execute(ctx)
    except ExecutionCanceled as err:
        _record(execution, node, run_index, task, started, status="canceled", error=err)
        raise
    except WaitingForReply as wait:
        task["data"] = {"main": wait.output}
        _record(execution, node, run_index, task, started, status="waiting")
        raise
    except EngineError as err:
        err.node = err.node or node.name
        _record(execution, node, run_index, task, started, status="error", error=err)
        raise
    except Exception as err:  # a bug or an unexpected library error inside a node
        wrapped = NodeExecutionError(f"{type(err).__name__}: {error_text(err)}", node=node.name)
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
