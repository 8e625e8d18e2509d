"""Running another workflow inside the caller's execution, as n8n's executeWorkflow does for the
Execute Workflow node and the Call n8n Workflow Tool: the child starts at its Execute Workflow
Trigger with the caller's items, runs to its end, and its last node's items return to the
caller.

The child is bounded by what bounds its caller, on the same worker: it shares the caller's stop
switch (a stop, or the execution's timeout, ends the child too) and its checkpoints (the child's
CPU time counts against the caller's MINI_N8N_EXECUTION_CPU_SECONDS, engine/cpu.py), it uses the
caller's services (credentials, model clients, the memory journal written with the caller's
end), and its expressions have their own budgets as every node's do. A child may call another,
at most MAX_DEPTH calls deep: a workflow that calls itself without end fails with a clear error
instead of running until its time is out.

As in n8n, the child has lifecycle hooks of its own: nothing it streams reaches the caller's
client (n8n gives sub-executions no sendChunk handler, so an Agent in a sub-workflow answers
whole), and its nodes' events do not reach the editor. Unlike n8n, which records a separate
execution for each call, its run data is not kept: the caller's node records what it returned.
A child that would wait (a Wait or Chat node) fails the call: its wait cannot be kept yet.

Which workflow: the stored one by id (`Services.workflows`, as it is stored; a workflow whose
`settings.callerPolicy` is "none", or "workflowsFromAList" without the caller's id in
`callerIds`, refuses to be called), or a workflow's JSON given in a parameter.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.errors import ExecutionCanceled, SubWorkflowError, WorkflowValidationError
from engine.hooks import Hooks
from engine.node import Item
from engine.workflow import Node, Workflow, load_workflow

if TYPE_CHECKING:
    from engine.context import Execution

MAX_DEPTH = 16  # sub-workflow calls within calls; n8n sets none
TRIGGER = "n8n-nodes-base.executeWorkflowTrigger"
# n8n's STARTING_NODES after the Execute Workflow Trigger, for a child that has none.
_OTHER_STARTS = ("n8n-nodes-base.manualTrigger", "n8n-nodes-base.start")
NOT_FOUND = "Workflow does not exist."


@dataclass(frozen=True)
class SubWorkflowRun:
    execution_id: str  # the child's $execution.id
    workflow_id: str
    outputs: list[list[Item]]  # per output of its last node


def stored(execution: Execution, workflow_id: Any, node: Node) -> Workflow:
    """The stored workflow `workflow_id` (n8n's source "database")."""
    if workflow_id in (None, ""):
        raise SubWorkflowError(
            'No information about the workflow to execute found. Please provide either the "id" '
            'or "code"!',
            node=node.name,
        )
    find = execution.services.workflows
    if find is None:
        raise SubWorkflowError(
            "This runner has no workflow store to find the sub-workflow in (run it on a worker)",
            node=node.name,
        )
    try:
        return find(str(workflow_id))
    except LookupError:
        raise SubWorkflowError(NOT_FOUND, node=node.name) from None
    except WorkflowValidationError as err:
        raise SubWorkflowError(f"The sub-workflow cannot run: {err}", node=node.name) from None


def given(execution: Execution, code: Any, node: Node) -> Workflow:
    """A workflow from its JSON in a parameter (n8n's source "parameter"): it takes the
    caller's id and settings when it has none of its own, as in n8n."""
    try:
        data = json.loads(code) if isinstance(code, str) else code
    except ValueError as err:
        raise SubWorkflowError(f"The workflow JSON is not valid: {err}", node=node.name) from None
    if not isinstance(data, dict):
        raise SubWorkflowError("The workflow JSON must be an object", node=node.name)
    data = {**data, "id": data.get("id") or execution.workflow.id}
    data.setdefault("settings", execution.workflow.settings)
    try:
        return load_workflow(data)
    except WorkflowValidationError as err:
        raise SubWorkflowError(f"The sub-workflow cannot run: {err}", node=node.name) from None


def run(
    execution: Execution, node: Node, workflow: Workflow, items: list[Item], last_run_only: bool
) -> SubWorkflowRun:
    """Run `workflow` as a child of `execution` with `items`; what its last node returned (its
    last run only with `last_run_only`, else every run's items, per output, in order)."""
    from engine.executor import run_workflow  # the executor imports the contexts, which call here

    if execution.depth + 1 > MAX_DEPTH:
        raise SubWorkflowError(
            f"Sub-workflows call each other more than {MAX_DEPTH} levels deep (does a workflow "
            "call itself without end?)",
            node=node.name,
        )
    _check_caller(workflow, execution.workflow, node)
    start = start_node(workflow, node)
    execution.sub_runs += 1
    child_id = f"{execution.id}.{execution.sub_runs}"
    child = run_workflow(workflow, items, start_node=start.name, hooks=Hooks(),
                         services=execution.services, execution_id=child_id, mode="integrated",
                         cancel=execution.cancel, parent=execution)  # fmt: skip
    if child.status != "success":
        execution.checkpoint.check_cpu()  # over the caller's CPU bound: the caller's error
        if child.status == "canceled" or execution.cancel.is_set():
            raise ExecutionCanceled()
        if child.status == "waiting":
            raise SubWorkflowError(
                f'The sub-workflow waits at "{child.last_node}": a Wait or Chat node cannot '
                "pause a sub-workflow yet",
                node=node.name,
            )
        raise SubWorkflowError(child.error or "The sub-workflow failed", node=node.name)
    outputs = _outputs(child.run_data.get(child.last_node or "", []), workflow, last_run_only)
    return SubWorkflowRun(child_id, workflow.id or execution.workflow.id, outputs)


def start_node(workflow: Workflow, node: Node) -> Node:
    """n8n's findSubworkflowStart: its Execute Workflow Trigger, else a manual start."""
    for kind in (TRIGGER, *_OTHER_STARTS):
        found = next((n for n in workflow.nodes.values() if n.type == kind), None)
        if found is not None:
            return found
    raise SubWorkflowError(
        "Missing node to start execution: please make sure the workflow you're calling "
        "contains an Execute Workflow Trigger node",
        node=node.name,
    )


def _check_caller(workflow: Workflow, caller: Workflow, node: Node) -> None:
    """The sub-workflow's `settings.callerPolicy`, as far as it means anything without n8n's
    projects: "none" refuses every caller, "workflowsFromAList" those not in `callerIds`."""
    policy = workflow.settings.get("callerPolicy")
    if workflow.id and workflow.id == caller.id:
        return  # a workflow calling itself is its own owner
    listed = [i.strip() for i in str(workflow.settings.get("callerIds") or "").split(",")]
    if policy == "none" or (policy == "workflowsFromAList" and caller.id not in listed):
        raise SubWorkflowError(
            f"The sub-workflow ({workflow.id}) cannot be called by this workflow", node=node.name
        )


def _outputs(runs: list[dict[str, Any]], workflow: Workflow, last_run_only: bool):
    """n8n's buildSubWorkflowOutput: the last node's last run, or, when the trigger (1.2, or
    an older one set to allRuns) and the caller want every run, each output's items of every
    run in order."""
    trigger = next((n for n in workflow.nodes.values() if n.type == TRIGGER), None)
    version = trigger.type_version if trigger else 1
    returns = (trigger.parameters.get("returnOutput") if trigger else None) or "lastRunOnly"
    if not runs:
        return [[]]
    if last_run_only or (version < 1.2 and returns != "allRuns"):
        return [list(branch or []) for branch in _main(runs[-1])] or [[]]
    merged: list[list[Item]] = []
    for task in runs:
        for index, branch in enumerate(_main(task)):
            while len(merged) <= index:
                merged.append([])
            merged[index].extend(branch or [])
    return merged or [[]]


def _main(task: dict[str, Any]) -> list[list[Item]]:
    return list((task.get("data") or {}).get("main") or [])


def start(execution: Execution, node: Node, workflow: Workflow, items: list[Item]) -> str:
    """Start `workflow` as an execution of its own (a caller that does not wait for it, n8n's
    doNotWaitToFinish): queued for any worker, bounded as any execution; its id."""
    begin = execution.services.start_workflow
    if begin is None:
        raise SubWorkflowError(
            "This runner cannot start a sub-workflow without waiting for it (run it on a worker, "
            'or turn "Wait For Sub-Workflow Completion" on)',
            node=node.name,
        )
    _check_caller(workflow, execution.workflow, node)
    return begin(workflow, start_node(workflow, node).name, items, execution.id)
