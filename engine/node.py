"""A node type is a declarative description plus one entry point.

Main nodes (triggers included) implement `execute(ctx)` and return their output items per output
index; sub-nodes implement `supply_data(ctx, item_index)` and return the object the consuming node
drives (a ChatModel, a Tool or a SessionMemory). Each type registers itself by its n8n type name
(engine/registry.py), so a new node is one new file in engine/nodes/.

`ctx` is the node's only window on the execution, and the protocols below are all of it:
`ExecuteFunctions` for `execute`, `SupplyDataFunctions` for `supply_data` (n8n's
IExecuteFunctions and ISupplyDataFunctions). engine/context.py implements them; a test may hand
a node any object with the members it uses.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, TypeVar

from engine.description import Input, NodeDescription

if TYPE_CHECKING:
    from engine.services import Services
    from engine.sub_workflow import SubWorkflowRun
    from engine.webhooks import WebhookSpec
    from engine.workflow import Node, Workflow

Item = dict[str, Any]  # {"json": {...}, "binary"?: {...}, "pairedItem"?: {...}}
NodeOutput = list[list[Item]]  # items per output index

AI_CONNECTION_TYPES = ("ai_languageModel", "ai_memory", "ai_tool")

T = TypeVar("T")


class NodeFunctions(Protocol):
    """What every node may use, main node or sub-node."""

    @property
    def node(self) -> Node: ...

    @property
    def workflow(self) -> Workflow: ...

    @property
    def services(self) -> Services: ...

    def load_workflow(self, workflow_id: Any = None, code: Any = None) -> Workflow:
        """A sub-workflow: the stored one with `workflow_id`, or the workflow JSON `code`
        (engine/sub_workflow.py); SubWorkflowError if it cannot be found or loaded."""

    def execute_workflow(
        self, workflow: Workflow, items: list[Item], last_run_only: bool = False
    ) -> SubWorkflowRun:
        """Run `workflow` inside this execution with `items` (n8n's executeWorkflow): what
        its last node returned."""

    def start_workflow(self, workflow: Workflow, items: list[Item]) -> str:
        """Start `workflow` as an execution of its own, not waited for; its id."""

    @property
    def execution_id(self) -> str: ...

    @property
    def execution_mode(self) -> str:
        """n8n's $execution.mode: "test" for a run started from the editor, else
        "production"."""

    @property
    def cancel(self) -> threading.Event:
        """Set when the execution is stopped; long calls poll it."""

    def check_canceled(self) -> None:
        """Raise ExecutionCanceled if the execution was stopped."""

    def checkpoint(self) -> None:
        """Call once per round of a loop that computes: raises if the execution was stopped or
        is over its CPU time, and lets other work on the process run (engine/cpu.py)."""

    def node_items(self, name: str) -> list[Item] | None:
        """Items of the named node's latest run (main output 0); None if it has not run."""

    def cpu_left(self) -> float | None:
        """CPU seconds the execution may still use (None: unbounded): the most a call that
        computes elsewhere may take (engine/cpu.py)."""

    def charge_cpu(self, seconds: float) -> None:
        """Count CPU time spent for the execution where its clock does not see it (a Code
        node's JavaScript, in a process of its own); raises if that is over its bound."""


class ExecuteFunctions(NodeFunctions, Protocol):
    """What a main node's `execute(ctx)` may use."""

    @property
    def input_items(self) -> list[Item]:
        """The items of main input 0."""

    def input_data(self, index: int) -> list[Item]:
        """The items of main input `index` (n8n's getInputData(index)); empty if none came."""

    @property
    def run_index(self) -> int:
        """Which run of this node this is (0 for its first in the execution)."""

    def get_parameter(self, path: str, default: Any = None, item_index: int = 0) -> Any:
        """The parameter at dotted `path` over the type's defaults, expressions resolved on
        input item `item_index`."""

    def get_filter(self, path: str, item_index: int = 0) -> Any:
        """A filter parameter (the conditions of IF, Filter, Switch) at `path`, expressions
        resolved on input item `item_index`, a missing value kept `undefined` (not null), as
        engine/conditions.py compares them."""

    def is_streaming(self) -> bool: ...

    def send_chunk(
        self,
        chunk_type: str,
        item_index: int,
        content: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        """One streamed chunk; `details` join its metadata (a tool step's name, input, ...)."""

    def send_response(self, response: dict[str, Any]) -> None: ...

    def log_node_output(self, lines: list[str]) -> None:
        """Console output of the node's run (a Code node's console.log), kept with its run
        data, where the editor shows it (n8n's logNodeOutput)."""

    def send_message(self, text: str, wait: bool) -> None:
        """Send the chat user a message (responseNodes mode); `wait`: a reply is awaited."""

    def resume_url(self, query: dict[str, str]) -> str:
        """A link (a path) that resumes this node's wait with `query` (n8n's
        getSignedResumeUrl): what an approval button points to."""

    def sub_nodes(self, connection_type: str) -> list[Node]:
        """Enabled sub-nodes plugged into this node through `connection_type`."""

    def supply(self, sub_node: Node, item_index: int) -> Any:
        """What `sub_node` supplies (its `supply_data`), evaluated on input item `item_index`."""

    def run_sub(
        self,
        sub_node: Node,
        connection_type: str,
        input_json: dict[str, Any],
        call: Callable[[], T],
        output_json: Callable[[T], dict[str, Any]],
    ) -> T:
        """Make `call` and record it as one run of `sub_node`."""


class SupplyDataFunctions(NodeFunctions, Protocol):
    """What a sub-node's `supply_data(ctx, item_index)` may use."""

    def get_parameter(self, path: str, default: Any = None, item_index: int | None = None) -> Any:
        """The parameter at dotted `path`, expressions resolved on the consuming node's item
        (`item_index` of supply_data unless given)."""

    def tool_call(self, args: dict[str, Any]) -> ExecuteFunctions:
        """A context to run this node's `execute` on a model's tool-call arguments: one input
        item holding them (a main node used as an Agent's tool, engine/node_tool.py)."""


class NodeType:
    """A node type: its `description` (engine/description.py) and its entry point.

    `kind`, `sub_output`, `sub_inputs` and `defaults` are read from the description when the
    class is defined, so the engine and the editor's forms (GET /rest/node-types) share it."""

    type: ClassVar[str]
    description: ClassVar[NodeDescription]
    kind: ClassVar[Literal["trigger", "main", "sub"]] = "main"
    sub_output: ClassVar[str | None] = None  # connection type a sub-node supplies
    sub_inputs: ClassVar[dict[str, Input]] = {}  # ai_* inputs a main node consumes
    defaults: ClassVar[dict[str, Any]] = {}  # parameter defaults, n8n names

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        desc = cls.__dict__.get("description")
        if desc is None:
            # A node written before descriptions existed: describe what its class attributes
            # say (no parameters, so nothing checked), so it still loads and lists.
            cls.description = _undeclared(cls)
            return
        cls.defaults = desc.defaults()
        cls.sub_output = desc.sub_output()
        cls.kind = "trigger" if desc.group == "trigger" else "sub" if cls.sub_output else "main"
        cls.sub_inputs = {i.type: i for i in desc.inputs if i.type != "main"}

    def validate(self, node: Node) -> None:
        """Raise WorkflowValidationError for parameters that can never work."""

    def main_input_count(self, node: Node) -> int:
        """How many main inputs `node` has (a Merge: its numberInputs)."""
        return sum(1 for i in self.description.inputs if i.type == "main")

    def required_inputs(self, node: Node) -> int | list[int] | None:
        """n8n's requiredInputs: the inputs (a count, or their indexes) that must have items
        before a node with several inputs runs once nothing else can; None: any."""
        return None

    def activation_warning(self, node: Node, queue_mode: bool) -> str | None:
        """Something the user should know when a workflow with this node is activated."""
        return None

    def validate_in(self, node: Node, workflow: Workflow) -> None:
        """Raise WorkflowValidationError when the rest of the workflow cannot serve this node
        (the Chat node needs a Chat Trigger in responseNodes mode)."""

    def resume(self, ctx: ExecuteFunctions, reply: Item) -> NodeOutput:
        """The output of a node that raised WaitingForReply, once the reply came; raising
        WaitingForReply again declines the reply and keeps waiting. (A wait that expired does
        not come here: the engine passes the node's input on, as n8n does.)"""
        raise NotImplementedError(f"{self.type} does not wait")

    def webhooks(self, node: Node) -> list[WebhookSpec]:
        """The webhooks a trigger listens on (none for other nodes)."""
        return []

    def execute(self, ctx: ExecuteFunctions) -> NodeOutput:
        raise NotImplementedError(f"{self.type} cannot run as a main node")

    def supply_data(self, ctx: SupplyDataFunctions, item_index: int) -> Any:
        raise NotImplementedError(f"{self.type} is not a sub-node")


def _undeclared(cls: type[NodeType]) -> NodeDescription:
    name = getattr(cls, "type", cls.__name__)
    inputs = tuple(cls.sub_inputs.values())
    main_in = () if cls.kind == "trigger" or cls.sub_output else (Input("main"),)
    return NodeDescription(
        display_name=name.rsplit(".", 1)[-1],
        group="trigger" if cls.kind == "trigger" else "core",
        inputs=main_in + inputs,
        outputs=(cls.sub_output,) if cls.sub_output else ("main",),
    )
