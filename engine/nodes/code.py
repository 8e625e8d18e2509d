"""Code (`n8n-nodes-base.code`, versions 1 and 2): the user's JavaScript over the node's items.

The JavaScript never runs in this process: the node hands a CodeTask (core/code_task.py: the
code, its input items, the items of the nodes it names, the execution and workflow) to the
runner its runner lends (Services.code_runner; a worker's: one V8 isolate per run, in processes
of their own, sandbox/), with the CPU the execution has left as a cap, and makes items of what
comes back as n8n does (engine/code_items.py). What the run cost in CPU is charged to the
execution; its console.log lines go with the node's run data, where the editor shows them.
Python is not supported: a workflow that asks for it is refused at import, naming the node.
"""

from __future__ import annotations

import re
from typing import Any

from core.code_task import CodeOutcome, CodeTask
from engine import code_items
from engine.description import NodeDescription, Option, Property
from engine.errors import ExecutionCanceled, NodeExecutionError, WorkflowValidationError
from engine.node import ExecuteFunctions, NodeOutput, NodeType
from engine.registry import register
from engine.workflow import Node

ALL_ITEMS, EACH_ITEM = "runOnceForAllItems", "runOnceForEachItem"
# What n8n's editor writes into a new Code node (its own declared default is empty).
DEFAULT_CODE = (
    "// Loop over input items and add a new field called 'myNewField' to the JSON of each one\n"
    "for (const item of $input.all()) {\n  item.json.myNewField = 1;\n}\n\nreturn $input.all();"
)
PYTHON = ("python", "pythonNative")
# $('Name'), $("Name"), $node["Name"], $node.Name, $items("Name"): the nodes whose items the
# code may read. A name that is not a literal (or `$node` indexed by a variable) sends all.
_NAMED = re.compile(r"""\$(?:items)?\(\s*(['"`])((?:\\.|(?!\1).)*)\1\s*[,)]""")
_NODE_INDEX = re.compile(r"""\$node\[\s*(['"`])((?:\\.|(?!\1).)*)\1\s*\]""")
_NODE_DOT = re.compile(r"\$node\.([A-Za-z_$][\w$]*)")
_DYNAMIC = re.compile(r"""\$(?:items)?\(\s*[^'"`\s)]|\$node\[\s*[^'"`\s]""")
# n8n refuses these in runOnceForEachItem before running anything (JsCodeValidator).
_EACH_ONLY = re.compile(r"\$input\.(first|last|all|itemMatching)")


@register
class Code(NodeType):
    type = "n8n-nodes-base.code"
    description = NodeDescription(
        display_name="Code",
        group="core",
        description="Run custom JavaScript code",
        version=2,
        versions=(1, 2),
        subtitle="code javascript js function script",
        properties=(
            Property(
                "mode",
                "Mode",
                "options",
                ALL_ITEMS,
                options=(
                    Option(
                        ALL_ITEMS,
                        "Run Once for All Items",
                        "Run this code only once, no matter how many input items there are",
                    ),
                    Option(
                        EACH_ITEM,
                        "Run Once for Each Item",
                        "Run this code as many times as there are input items",
                    ),
                ),
            ),
            Property(
                "language",
                "Language",
                "options",
                "javaScript",
                options=(
                    Option("javaScript", "JavaScript"),
                    Option("pythonNative", "Python (not supported by mini-n8n)"),
                    Option("python", "Python (Beta, not supported by mini-n8n)"),
                ),
                display_options={"show": {"@version": (2,)}},
            ),
            Property(
                "jsCode",
                "JavaScript",
                "string",
                DEFAULT_CODE,
                description=(
                    "JavaScript code to execute. Debug with console.log(): its lines show with "
                    "the node's run data."
                ),
                type_options={
                    "editor": "codeNodeEditor",
                    "editorLanguage": "javaScript",
                    "rows": 12,
                },
                display_options={"show": {"language": ("javaScript",)}},
            ),
        ),
    )

    def validate(self, node: Node) -> None:
        if node.type_version >= 2 and node.parameters.get("language") in PYTHON:
            raise WorkflowValidationError(
                "Python in the Code node is not supported by mini-n8n: only JavaScript "
                '(set "language" to JavaScript, or disable the node)',
                node=node.name,
            )

    def execute(self, ctx: ExecuteFunctions) -> NodeOutput:
        mode = ctx.get_parameter("mode", ALL_ITEMS)
        code = ctx.node.parameters.get("jsCode", DEFAULT_CODE)  # code, never an expression
        if not isinstance(code, str):
            raise NodeExecutionError("the JavaScript code must be text", node=ctx.node.name)
        if mode == EACH_ITEM:
            _refuse_all_items_methods(code)
        runner = ctx.services.code_runner
        if runner is None:
            raise NodeExecutionError(
                "this process was given no JavaScript runner for the Code node",
                node=ctx.node.name,
            )
        outcome = runner.run(_task(ctx, code, mode), ctx.cancel, ctx.cpu_left())
        if outcome.logs:
            ctx.log_node_output(outcome.logs)
        ctx.charge_cpu(outcome.cpu_seconds)  # over the execution's CPU bound: it stops here
        return [_paired(_items(outcome, mode, ctx.node.name), len(ctx.input_items))]


def _refuse_all_items_methods(code: str) -> None:
    match = _EACH_ONLY.search(code)
    if not match:
        return
    method = match.group(1)
    for number, line in enumerate(code.split("\n"), start=1):
        line = line.lstrip()
        if method in line and not line.startswith(("//", "/*", "*")):
            raise code_items.CodeResultError(
                f"Can't use .{method}() here [line {number}, for item 0]",
                "This is only available in 'Run Once for All Items' mode",
            )


def _task(ctx: ExecuteFunctions, code: str, mode: str) -> CodeTask:
    workflow = ctx.workflow
    parents = workflow.main_parents(ctx.node.name)
    timezone = workflow.settings.get("timezone")
    return CodeTask(
        code=code,
        mode=mode,
        items=ctx.input_items,
        nodes=_named_nodes(ctx, code),
        node_names=list(workflow.nodes),
        previous_node=parents[0].source if parents else None,
        execution={"id": ctx.execution_id, "mode": ctx.execution_mode},
        workflow={"id": workflow.id, "name": workflow.name, "active": workflow.active},
        timezone=timezone if timezone and timezone != "DEFAULT" else "America/New_York",
    )


def _named_nodes(ctx: ExecuteFunctions, code: str) -> dict[str, list[dict[str, Any]]]:
    """The items of the nodes the code names (every node's, if it names one by a variable)."""
    if _DYNAMIC.search(code):
        names = set(ctx.workflow.nodes)
    else:
        names = {m.group(2) for m in _NAMED.finditer(code)}
        names |= {m.group(2) for m in _NODE_INDEX.finditer(code)}
        names |= {m.group(1) for m in _NODE_DOT.finditer(code)}
    found = {}
    for name in names:
        items = ctx.node_items(name)
        if items is not None:
            found[name] = items
    return found


def _items(outcome: CodeOutcome, mode: str, node: str) -> list[dict[str, Any]]:
    if outcome.status == "canceled":
        raise ExecutionCanceled()
    if outcome.status != "ok":
        error = outcome.error or {}
        raise NodeExecutionError(
            _error_message(error), node=node, item_index=error.get("itemIndex")
        )
    if mode == EACH_ITEM:
        return [code_items.each_item(item, item["pairedItem"]["item"]) for item in outcome.result]
    return code_items.all_items(outcome.result, outcome.undefined_result)


def _error_message(error: dict[str, Any]) -> str:
    """n8n's words for a thrown error: its message and the line of the code it came from (the
    task runner's ExecutionError; the item is not named, in either mode)."""
    message = str(error.get("message") or "Unknown error")
    line = error.get("lineNumber")
    return f"{message} [line {line}]" if line else message


def _paired(items: list[dict[str, Any]], inputs: int) -> list[dict[str, Any]]:
    """n8n pairs output items that name no input item (WorkflowExecute.assignPairedItems): with
    the one input item, with the input item at their index when the counts match, or one output
    item with the first of several inputs."""
    for index, item in enumerate(items):
        if "pairedItem" in item:
            continue
        if inputs == 1 or (len(items) == 1 and inputs > 1):
            item["pairedItem"] = {"item": 0}
        elif inputs == len(items):
            item["pairedItem"] = {"item": index}
        else:
            break
    return items
