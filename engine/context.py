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
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

from core.chat_node_message import ChatNodeMessage
from core.clock import now_ms
from core.redis_errors import error_text
from engine.cpu import Checkpoints
from engine.errors import EngineError, ExecutionCanceled, ExpressionError
from engine.expressions import ExpressionData, has_expression, resolve
from engine.hooks import Hooks
from engine.node import Item
from engine.services import Services
from engine.workflow import Node, Workflow

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
    checkpoint: Checkpoints = field(init=False)

    def __post_init__(self) -> None:
        self.checkpoint = Checkpoints(self.services, self.cancel)

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
            workflow={"id": wf.id, "name": wf.name, "active": wf.active},
            checkpoint=self.execution.checkpoint,
        )

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


def error_json(err: BaseException, node_name: str | None = None) -> dict[str, Any]:
    message = (
        str(err) if isinstance(err, EngineError) else f"{type(err).__name__}: {error_text(err)}"
    )
    if isinstance(err, EngineError) and err.node and message.startswith(f'Node "{err.node}": '):
        message = err.message
    return {"message": message, "node": node_name, "name": type(err).__name__}
