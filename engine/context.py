"""The contexts a node runs in. They are the node's only window on the execution: parameters
(with expressions resolved), input items, sub-nodes, streaming and the services lent by the
runner. ExecuteContext implements engine.node.ExecuteFunctions, SupplyContext implements
engine.node.SupplyDataFunctions: what a node may use is declared there."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote, urlencode

from core.chat_node_message import ChatNodeMessage
from core.clock import now_ms
from core.redis_errors import error_text
from engine.cpu import Checkpoints
from engine.errors import EngineError, ExecutionCanceled, ExpressionError, NodeApiError
from engine.expressions import ExpressionData, has_expression, resolve
from engine.hooks import Hooks
from engine.node import Item
from engine.services import Services
from engine.workflow import Node, Workflow

if TYPE_CHECKING:
    from engine.sub_workflow import SubWorkflowRun

T = TypeVar("T")


@dataclass
class Execution:
    """State shared by every node of one execution."""

    id: str
    workflow: Workflow
    hooks: Hooks
    services: Services
    mode: str = "manual"
    streaming_requested: bool = False
    cancel: threading.Event = field(default_factory=threading.Event)
    run_data: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    execution_index: int = 0
    streamed: bool = False
    # signature -> query of the links a waiting node handed out (ExecuteContext.resume_url)
    resume_links: dict[str, dict[str, str]] = field(default_factory=dict)
    # The caller's execution when this one runs a sub-workflow inside it (engine/sub_workflow.py):
    # it shares the caller's checkpoints (its stop, its CPU bound) and is one level deeper.
    parent: Execution | None = None
    # n8n's resumeToken: the `signature` of $execution.resumeUrl, made when first read and kept
    # in the waiting state, so that only whoever was handed the URL resumes a Wait node.
    resume_token: str | None = None
    checkpoint: Checkpoints = field(init=False)
    sub_runs: int = field(default=0, init=False)  # sub-workflows run so far: the next one's id

    def __post_init__(self) -> None:
        if self.parent is not None:
            self.checkpoint = self.parent.checkpoint
        else:
            self.checkpoint = Checkpoints(self.services, self.cancel)

    @property
    def depth(self) -> int:
        """How many sub-workflow calls deep this execution runs (0: the one a trigger started)."""
        return 0 if self.parent is None else self.parent.depth + 1

    def resume_url(self) -> str:
        """n8n's $execution.resumeUrl: `<WEBHOOK_URL>webhook-waiting/<id>?signature=<token>`."""
        if self.resume_token is None:
            self.resume_token = secrets.token_hex(32)  # n8n's: 64 hex digits
        base = self.services.webhook_url.rstrip("/")
        return f"{base}/webhook-waiting/{quote(self.id, safe='')}?signature={self.resume_token}"

    def variable(self) -> dict[str, Any]:
        """n8n's `$execution`: its id, its mode (a manual run is "test") and its resume URL."""
        mode = "test" if self.mode == "manual" else "production"
        return {"id": self.id, "mode": mode, "resumeUrl": self.resume_url()}

    def is_streaming(self) -> bool:
        # n8n's isStreaming(): someone listens for chunks *and* streaming was asked for.
        return self.streaming_requested and self.hooks.has("sendChunk")

    def next_index(self) -> int:
        self.execution_index += 1
        return self.execution_index - 1

    def node_items(self, name: str) -> list[Item] | None:
        runs = self.run_data.get(name)
        if not runs:
            return None
        main = runs[-1].get("data", {}).get("main") or [[]]
        return main[0] if main else []

    def check_canceled(self) -> None:
        if self.cancel.is_set():
            raise ExecutionCanceled()


def get_path(data: dict[str, Any], path: str, default: Any = None) -> Any:
    """The value at a dotted path; a number part indexes a list (`rules.values.0.conditions`)."""
    current: Any = data
    for part in path.split("."):
        if isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        elif isinstance(current, dict) and part in current:
            current = current[part]
        else:
            return default
    return current


def merged_parameters(node: Node, defaults: dict[str, Any]) -> dict[str, Any]:
    """Node parameters over the type's defaults (n8n exports omit parameters left at default),
    a copy of their own."""
    merged = plain_copy(defaults)
    _deep_merge(merged, node.parameters)
    return merged


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _deep_merge(base[key], value)
        else:
            base[key] = plain_copy(value)


def plain_copy(value: Any) -> Any:
    """A deep copy of JSON-shaped data (dicts, lists and scalars), as parameters are: several
    times quicker than copy.deepcopy, which every node of every execution paid for, twice.
    Anything else (a tuple, an object) is shared, not copied."""
    if isinstance(value, dict):
        return {key: plain_copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain_copy(item) for item in value]
    return value


class _NodeContext:
    def __init__(self, execution: Execution, node: Node, input_items: list[Item]):
        self.execution = execution
        self.node = node
        self.input_items = input_items
        self.parameters = merged_parameters(node, execution.workflow.node_type(node.name).defaults)

    @property
    def services(self) -> Services:
        return self.execution.services

    @property
    def execution_id(self) -> str:
        return self.execution.id

    @property
    def execution_mode(self) -> str:
        return "test" if self.execution.mode == "manual" else "production"

    @property
    def cancel(self) -> threading.Event:
        return self.execution.cancel

    @property
    def workflow(self) -> Workflow:
        return self.execution.workflow

    def check_canceled(self) -> None:
        self.execution.check_canceled()

    def checkpoint(self) -> None:
        self.execution.checkpoint()

    def node_items(self, name: str) -> list[Item] | None:
        return self.execution.node_items(name)

    def cpu_left(self) -> float | None:
        return self.execution.checkpoint.left()

    def charge_cpu(self, seconds: float) -> None:
        self.execution.checkpoint.charge(seconds)

    def expression_data(self, item_index: int) -> ExpressionData:
        items = self.input_items
        item = items[item_index] if item_index < len(items) else (items[0] if items else {})
        wf = self.execution.workflow
        return ExpressionData(
            json=item.get("json", {}),
            item_index=item_index,
            parameters=self.node.parameters,
            node_items=self.execution.node_items,
            input_items=items,
            execution_id=self.execution.id,
            execution=self.execution.variable,
            workflow={"id": wf.id, "name": wf.name, "active": wf.active},
            checkpoint=self.execution.checkpoint,
        )

    def load_workflow(self, workflow_id: Any = None, code: Any = None) -> Workflow:
        from engine import sub_workflow  # it runs the executor, which imports this module

        if code is not None:
            return sub_workflow.given(self.execution, code, self.node)
        return sub_workflow.stored(self.execution, workflow_id, self.node)

    def execute_workflow(
        self, workflow: Workflow, items: list[Item], last_run_only: bool = False
    ) -> SubWorkflowRun:
        from engine import sub_workflow

        return sub_workflow.run(self.execution, self.node, workflow, items, last_run_only)

    def start_workflow(self, workflow: Workflow, items: list[Item]) -> str:
        from engine import sub_workflow

        return sub_workflow.start(self.execution, self.node, workflow, items)

    def get_parameter(self, path: str, default: Any = None, item_index: int = 0) -> Any:
        return self._resolved(path, default, item_index, keep_undefined=False)

    def get_filter(self, path: str, item_index: int = 0) -> Any:
        return self._resolved(path, {}, item_index, keep_undefined=True)

    def _resolved(self, path: str, default: Any, item_index: int, *, keep_undefined: bool) -> Any:
        raw = get_path(self.parameters, path, default)
        if not has_expression(raw):
            # What `resolve` would answer (a new structure), without the expression data it
            # would build for nothing: most parameters are plain values.
            return plain_copy(raw)
        data = self.expression_data(item_index)
        data.keep_undefined = keep_undefined
        try:
            return resolve(raw, data)
        except ExpressionError as err:
            err.node, err.parameter, err.item_index = self.node.name, path, item_index
            raise


class ExecuteContext(_NodeContext):
    """What a main node (trigger, Agent, Set, ...) sees."""

    def __init__(
        self,
        execution: Execution,
        node: Node,
        input_items: list[Item],
        run_index: int,
        inputs: list[list[Item]] | None = None,
    ):
        super().__init__(execution, node, input_items)
        self.run_index = run_index
        self.inputs = inputs if inputs is not None else [input_items]
        self.console: list[str] = []  # log_node_output's lines, kept with the run (executor)

    def input_data(self, index: int) -> list[Item]:
        return self.inputs[index] if index < len(self.inputs) else []

    def is_streaming(self) -> bool:
        return self.execution.is_streaming()

    def send_chunk(
        self,
        chunk_type: str,
        item_index: int,
        content: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        chunk: dict[str, Any] = {"type": chunk_type}
        if content is not None:
            chunk["content"] = content
        chunk["metadata"] = {
            "nodeId": self.node.id,
            "nodeName": self.node.name,
            "itemIndex": item_index,
            "runIndex": self.run_index,
            "timestamp": now_ms(),
            **(details or {}),
        }
        if chunk_type == "item":
            self.execution.streamed = True
        self.execution.hooks.run("sendChunk", chunk)

    def send_response(self, response: dict[str, Any]) -> None:
        self.execution.hooks.run("sendResponse", response)

    def log_node_output(self, lines: list[str]) -> None:
        self.console.extend(lines)

    def send_message(self, text: str, wait: bool) -> None:
        message = ChatNodeMessage(text, wait, self.node.name, self.run_index, time.time() * 1000)
        self.execution.hooks.run("sendMessage", message)

    def resume_url(self, query: dict[str, str]) -> str:
        """n8n's getSignedResumeUrl, as a path: `/webhook-waiting/<execution>/<node id>?<query>
        &signature=<random>`. The signature is remembered in the waiting state, so the api
        resumes the wait only for a link this node handed out, with the query it was issued
        with (whoever serves the path makes it absolute)."""
        signature = secrets.token_hex(32)
        self.execution.resume_links[signature] = dict(query)
        path = (
            f"/webhook-waiting/{quote(self.execution.id, safe='')}/{quote(self.node.id, safe='')}"
        )
        return f"{path}?{urlencode({**query, 'signature': signature})}"

    def sub_nodes(self, connection_type: str) -> list[Node]:
        return [
            n
            for n in self.execution.workflow.sub_nodes(self.node.name, connection_type)
            if not n.disabled
        ]

    def supply(self, sub_node: Node, item_index: int) -> Any:
        """Ask a sub-node for what it supplies (n8n's supplyData), evaluated on this item."""
        ctx = SupplyContext(self, sub_node, item_index)
        return self.execution.workflow.node_type(sub_node.name).supply_data(ctx, item_index)

    def run_sub(
        self,
        sub_node: Node,
        connection_type: str,
        input_json: dict[str, Any],
        call: Callable[[], T],
        output_json: Callable[[T], dict[str, Any]],
    ) -> T:
        """Call a sub-node and record the call as one run of that sub-node."""
        execution = self.execution
        run_index = len(execution.run_data.get(sub_node.name, []))
        execution.hooks.run("nodeExecuteBefore", execution, sub_node.name, run_index)
        started = time.monotonic()
        task: dict[str, Any] = {
            "startTime": now_ms(),
            "executionIndex": execution.next_index(),
            "source": [{"previousNode": self.node.name, "previousNodeRun": self.run_index}],
            "inputOverride": {connection_type: [[{"json": input_json}]]},
        }
        try:
            result = call()
        except Exception as err:
            task.update(executionStatus="error", error=error_json(err, sub_node.name))
            self._finish_sub(sub_node, run_index, task, started)
            raise
        task.update(
            executionStatus="success", data={connection_type: [[{"json": output_json(result)}]]}
        )
        self._finish_sub(sub_node, run_index, task, started)
        return result

    def _finish_sub(
        self, sub_node: Node, run_index: int, task: dict[str, Any], started: float
    ) -> None:
        task["executionTime"] = int((time.monotonic() - started) * 1000)
        self.execution.run_data.setdefault(sub_node.name, []).append(task)
        self.execution.hooks.run("nodeExecuteAfter", self.execution, sub_node.name, run_index, task)


class SupplyContext(_NodeContext):
    """What a sub-node sees: its own parameters, evaluated on the consuming node's input item."""

    def __init__(self, parent: ExecuteContext, node: Node, item_index: int):
        super().__init__(parent.execution, node, parent.input_items)
        self.parent = parent
        self.item_index = item_index

    def get_parameter(self, path: str, default: Any = None, item_index: int | None = None) -> Any:
        index = self.item_index if item_index is None else item_index
        return super().get_parameter(path, default, index)

    def tool_call(self, args: dict[str, Any]) -> ExecuteContext:
        """A context to run this node as a main node on the model's arguments, as n8n runs a
        node used as a tool: one input item holding them (so `$json` and `$fromAI()` read them),
        its run counted among the node's runs."""
        run_index = len(self.execution.run_data.get(self.node.name, []))
        return ExecuteContext(self.execution, self.node, [{"json": args}], run_index)


def error_json(err: BaseException, node_name: str | None = None) -> dict[str, Any]:
    message = (
        str(err) if isinstance(err, EngineError) else f"{type(err).__name__}: {error_text(err)}"
    )
    if isinstance(err, EngineError) and err.node and message.startswith(f'Node "{err.node}": '):
        message = err.message
    data = {"message": message, "node": node_name, "name": type(err).__name__}
    if isinstance(err, NodeApiError):  # n8n's fields of an API error, for the editor
        data.update(httpCode=err.http_code, description=err.description)
    elif isinstance(err, EngineError) and err.description:  # a hint under the message
        data["description"] = err.description
    return data
