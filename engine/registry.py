"""The node registry: every node type by its n8n type name.

A node file registers its class with `@register`; importing engine.nodes imports every node file,
so asking the registry is enough to find them all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from engine.node import NodeType

N = TypeVar("N", bound=type[NodeType])

_REGISTRY: dict[str, type[NodeType]] = {}


def register(cls: N) -> N:
    _REGISTRY[cls.type] = cls
    return cls


def node_types() -> Mapping[str, type[NodeType]]:
    # Imported here, not at the top: every node file imports this module to register itself.
    import engine.nodes  # noqa: F401  (importing the package registers every node file)

    return _REGISTRY


def get_node_type(type_name: str) -> NodeType | None:
    cls = node_types().get(type_name)
    return cls() if cls else None
