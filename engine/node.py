"""A node type is a declarative description plus one entry point.

Main nodes (triggers included) implement `execute(ctx)` and return their output items per output
index; sub-nodes implement `supply_data(ctx, item_index)` and return the object the consuming node
drives (a ChatModel, a Tool or a SessionMemory). Each type registers itself by its n8n type name,
so a new node is one new file in engine/nodes/.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

if TYPE_CHECKING:
    from engine.context import ExecuteContext, SupplyContext
    from engine.workflow import Node

Item = dict[str, Any]  # {"json": {...}, "binary"?: {...}, "pairedItem"?: {...}}
NodeOutput = list[list[Item]]  # items per output index

AI_CONNECTION_TYPES = ("ai_languageModel", "ai_memory", "ai_tool")


@dataclass(frozen=True)
class SubInput:
    """An ai_* input of a main node: which sub-nodes it takes."""

    required: bool = False
    max_connections: int | None = None  # None = any number


class NodeType:
    type: ClassVar[str]
    kind: ClassVar[Literal["trigger", "main", "sub"]] = "main"
    sub_output: ClassVar[str | None] = None  # connection type a sub-node supplies
    sub_inputs: ClassVar[dict[str, SubInput]] = {}  # ai_* inputs a main node consumes
    defaults: ClassVar[dict[str, Any]] = {}  # parameter defaults, n8n names

    def validate(self, node: Node) -> None:
        """Raise WorkflowValidationError for parameters that can never work."""

    def activation_warning(self, node: Node, queue_mode: bool) -> str | None:
        """Something the user should know when a workflow with this node is activated."""
        return None

    def execute(self, ctx: ExecuteContext) -> NodeOutput:
        raise NotImplementedError(f"{self.type} cannot run as a main node")

    def supply_data(self, ctx: SupplyContext, item_index: int) -> Any:
        raise NotImplementedError(f"{self.type} is not a sub-node")


_REGISTRY: dict[str, type[NodeType]] = {}


def register(cls: type[NodeType]) -> type[NodeType]:
    _REGISTRY[cls.type] = cls
    return cls


def node_types() -> dict[str, type[NodeType]]:
    import engine.nodes  # noqa: F401  (importing the package registers every node file)

    return _REGISTRY


def get_node_type(type_name: str) -> NodeType | None:
    cls = node_types().get(type_name)
    return cls() if cls else None
