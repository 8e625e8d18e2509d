"""What a node type declares about itself (n8n's INodeTypeDescription), and the checks read from it.

One declaration serves three readers: the engine (parameter defaults, which `ai_*` inputs a node
takes and how many, the parameter checks at import and activation), the REST api
(`GET /rest/node-types` sends `to_json()`), and the editor (its node creator and parameter forms
are built from that JSON). So a parameter's type, options, `required` flag and `displayOptions`
are written once, here in each node file, and the engine refuses exactly what the form cannot
produce.

A node file declares:

    description = NodeDescription(
        display_name="Calculator", group="tool", description="...",
        outputs=("ai_tool",),
        properties=(Property("delayPerTokenMs", "Delay per Token (ms)", "number", 0),),
    )

Names follow n8n: `displayName`, `displayOptions` ({"show": {"param": [values]}}), option lists
of {name, value}; collections hold properties, fixedCollections hold named groups of properties.
A condition may name a root parameter from inside a collection (`"/operation"`), or the node's
version (`"@version": [{"_cnd": {"gte": 1.1}}]`), as n8n's do: a node whose form changed
between versions declares every version's parameters once, each shown for its versions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from engine.errors import WorkflowValidationError

PropertyType = Literal[
    "string",
    "number",
    "boolean",
    "options",
    "collection",
    "fixedCollection",
    # n8n's resource mapper (a sub-workflow's inputs): {"mappingMode", "value": {...}, "schema"}
    "resourceMapper",
    "resourceLocator",
    "json",
    "filter",  # n8n's conditions: {"conditions": [...], "combinator", "options"}
]
# The node creator's sections (n8n: Triggers; AI › Agents, Models, Memory, Tools; Core).
Group = Literal["trigger", "agent", "model", "memory", "tool", "core"]

# What an ai_* input is called on the canvas (n8n's slot labels).
SLOT_NAMES = {"ai_languageModel": "Chat Model", "ai_memory": "Memory", "ai_tool": "Tool"}


def slot_name(connection_type: str) -> str:
    """A connection type as the editor names it ("Chat Model"), for messages people read."""
    return SLOT_NAMES.get(connection_type, connection_type)


@dataclass(frozen=True)
class Option:
    """One choice of an `options` parameter."""

    value: Any
    name: str  # what the form shows
    description: str = ""

    def to_json(self) -> dict[str, Any]:
        data = {"name": self.name, "value": self.value}
        if self.description:
            data["description"] = self.description
        return data


@dataclass(frozen=True)
class FieldGroup:
    """One group of a fixedCollection: `{<name>: [ {<values>...}, ... ]}` (or one object)."""

    name: str
    display_name: str
    values: tuple[Property, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "displayName": self.display_name,
            "values": [p.to_json() for p in self.values],
        }


@dataclass(frozen=True)
class Property:
    """One parameter of a node, as n8n's INodeProperties."""

    name: str
    display_name: str
    type: PropertyType
    default: Any = None
    required: bool = False
    description: str = ""
    placeholder: str = ""
    options: tuple[Option, ...] = ()  # for "options"
    children: tuple[Property, ...] = ()  # for "collection" (n8n: options)
    groups: tuple[FieldGroup, ...] = ()  # for "fixedCollection" (n8n: options)
    display_options: Mapping[str, Mapping[str, tuple[Any, ...]]] | None = None
    type_options: Mapping[str, Any] = field(default_factory=dict)  # rows, minValue, ...

    def engine_default(self) -> Any:
        """The value the engine reads when the parameter is absent. A collection is {} in the
        form, but its options' defaults apply when read (as n8n nodes pass them to
        getNodeParameter), so the engine's default for it holds them."""
        if self.type == "collection":
            return {child.name: child.engine_default() for child in self.children}
        return _copy(self.default)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "displayName": self.display_name,
            "type": self.type,
            "default": _copy(self.default),
        }
        if self.required:
            data["required"] = True
        if self.description:
            data["description"] = self.description
        if self.placeholder:
            data["placeholder"] = self.placeholder
        if self.type == "options":
            data["options"] = [o.to_json() for o in self.options]
        elif self.type == "collection":
            data["options"] = [c.to_json() for c in self.children]
        elif self.type == "fixedCollection":
            data["options"] = [g.to_json() for g in self.groups]
        if self.display_options:
            data["displayOptions"] = {
                k: {name: list(values) for name, values in v.items()}
                for k, v in self.display_options.items()
            }
        if self.type_options:
            data["typeOptions"] = dict(self.type_options)
        return data


@dataclass(frozen=True)
class Input:
    """An input of a node: `main`, or an ai_* slot and how many sub-nodes it takes."""

    type: str
    required: bool = False
    max_connections: int | None = None  # None = any number

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": self.type, "required": self.required}
        if self.max_connections is not None:
            data["maxConnections"] = self.max_connections
        if self.type in SLOT_NAMES:
            data["displayName"] = SLOT_NAMES[self.type]
        return data

    @property
    def display_name(self) -> str:
        return slot_name(self.type)


@dataclass(frozen=True)
class CredentialSlot:
    """A credential type the node uses (n8n: credentials[])."""

    name: str  # the credential type, e.g. openAiApi
    required: bool = False
    display_options: Mapping[str, Mapping[str, tuple[Any, ...]]] | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "required": self.required}
        if self.display_options:
            data["displayOptions"] = {
                k: {name: list(values) for name, values in v.items()}
                for k, v in self.display_options.items()
            }
        return data


@dataclass(frozen=True)
class NodeDescription:
    display_name: str
    group: Group
    description: str = ""
    version: float = 1  # the typeVersion a new node gets
    inputs: tuple[Input, ...] = (Input("main"),)
    outputs: tuple[str, ...] = ("main",)
    output_names: tuple[str, ...] = ()  # n8n's outputNames: what each main output is called
    input_names: tuple[str, ...] = ()  # n8n's input displayNames (a Merge's "Input 1", ...)
    # The main outputs follow the parameters (n8n's outputs expression: a Switch's rules); the
    # editor offers one more output port than the highest connected one.
    dynamic_outputs: bool = False
    credentials: tuple[CredentialSlot, ...] = ()
    properties: tuple[Property, ...] = ()
    subtitle: str = ""  # the search words the node creator also matches
    webhook: bool = False  # a new node gets a webhookId
    # The typeVersions an export may carry (n8n's version list); empty: any. `version` is the
    # one a new node gets (n8n's defaultVersion).
    versions: tuple[float, ...] = ()

    def defaults(self) -> dict[str, Any]:
        return {p.name: p.engine_default() for p in self.properties}

    def sub_output(self) -> str | None:
        return next((o for o in self.outputs if o.startswith("ai_")), None)

    def to_json(self, type_name: str) -> dict[str, Any]:
        return {
            "name": type_name,
            "displayName": self.display_name,
            "group": self.group,
            "description": self.description,
            "version": self.version,
            "versions": list(self.versions or (self.version,)),
            "defaults": {"name": self.display_name},
            "inputs": [i.to_json() for i in self.inputs],
            "outputs": list(self.outputs),
            "outputNames": list(self.output_names),
            "inputNames": list(self.input_names),
            "dynamicOutputs": self.dynamic_outputs,
            "credentials": [c.to_json() for c in self.credentials],
            "properties": [p.to_json() for p in self.properties],
            "subtitle": self.subtitle,
            "webhook": self.webhook,
        }


# --- the checks ----------------------------------------------------------------------------------


def displayed(
    prop: Property | CredentialSlot,
    values: Mapping[str, Any],
    version: float | None = None,
    root: Mapping[str, Any] | None = None,
) -> bool:
    """Whether `prop` shows (and so counts) given its siblings' `values` (n8n's displayOptions:
    every `show` condition holds and no `hide` condition does). `/name` reads the node's root
    parameters (`root`, else `values`), `@version` the node's typeVersion."""
    conditions = prop.display_options or {}
    for name, allowed in (conditions.get("show") or {}).items():
        if not any(_matches(_lookup(name, values, version, root), a) for a in allowed):
            return False
    for name, denied in (conditions.get("hide") or {}).items():
        if any(_matches(_lookup(name, values, version, root), d) for d in denied):
            return False
    return True


def _lookup(name: str, values: Mapping[str, Any], version: float | None, root) -> Any:
    if name == "@version":
        return version
    if name.startswith("/"):
        return (values if root is None else root).get(name[1:])
    return values.get(name)


# n8n's display conditions ({"_cnd": {"gte": 1.1}}) beside plain values.
_CONDITIONS = {
    "eq": lambda v, x: v == x,
    "not": lambda v, x: v != x,
    "gte": lambda v, x: v is not None and v >= x,
    "gt": lambda v, x: v is not None and v > x,
    "lte": lambda v, x: v is not None and v <= x,
    "lt": lambda v, x: v is not None and v < x,
}


def _matches(value: Any, allowed: Any) -> bool:
    if isinstance(allowed, Mapping) and "_cnd" in allowed:
        return all(
            name in _CONDITIONS and _CONDITIONS[name](value, operand)
            for name, operand in allowed["_cnd"].items()
        )
    return bool(value == allowed)


def shown_values(
    props: tuple[Property, ...],
    given: Mapping[str, Any],
    version: float | None = None,
    root: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The values the form shows at this level: given or default, for the properties that are
    displayed. A hidden parameter counts as absent, as in n8n, so a condition on it (a 1.0
    parameter seen from a 1.3 node) does not hold. Two rounds settle conditions that name a
    parameter declared after them."""
    values: dict[str, Any] = {**{p.name: p.engine_default() for p in props}, **given}
    for _ in range(2):
        level_root = values if root is None else root
        values = {
            p.name: given[p.name] if p.name in given else p.engine_default()
            for p in props
            if displayed(p, values, version, level_root)
        }
    return values


def check_parameters(
    description: NodeDescription,
    parameters: Mapping[str, Any],
    node: str,
    version: float | None = None,
) -> None:
    """Raise WorkflowValidationError (naming `node`) for a parameter the declaration cannot
    accept: a required one left empty, a value of the wrong type, an unknown option, a
    typeVersion the node type does not have. Expressions (`=...`) are left to run time;
    parameters the declaration does not name (other versions' fields) are left alone."""
    if description.versions and version is not None and version not in description.versions:
        known = ", ".join(f"{v:g}" for v in description.versions)
        raise WorkflowValidationError(
            f"typeVersion {version:g} is not one of this node's versions ({known})", node=node
        )
    root = shown_values(description.properties, parameters, version)
    _check_all(description.properties, root, parameters, node, "", _Scope(version, root))


@dataclass(frozen=True)
class _Scope:
    version: float | None
    root: Mapping[str, Any]


def _check_all(
    props: tuple[Property, ...],
    values: Mapping[str, Any],
    given: Mapping[str, Any],
    node: str,
    prefix: str,
    scope: _Scope,
) -> None:
    for prop in props:
        if not displayed(prop, values, scope.version, scope.root):
            continue
        path = f"{prefix}{prop.name}"
        if prop.name not in given:
            if prop.required and _empty(prop.engine_default()):
                raise WorkflowValidationError(
                    f"{prop.display_name} is required ({path})", node=node
                )
            continue
        _check_value(prop, given[prop.name], node, path, scope)


def _check_value(prop: Property, value: Any, node: str, path: str, scope: _Scope) -> None:
    if _is_expression(value):
        return
    if prop.required and _empty(value):
        raise WorkflowValidationError(f"{prop.display_name} is required ({path})", node=node)
    if value is None:
        return
    problem = _type_problem(prop, value)
    if problem:
        raise WorkflowValidationError(f"{prop.display_name} {problem} ({path})", node=node)
    if prop.type == "options":
        allowed = [o.value for o in prop.options]
        # n8n's options loaded at run time (a Switch's fallback output index) are not a list
        # known here: the node checks them when it runs.
        dynamic = "loadOptionsMethod" in prop.type_options
        if value not in allowed and not dynamic:
            raise WorkflowValidationError(
                f'unknown {prop.display_name.lower()} "{value}"', node=node
            )
    elif prop.type == "collection":
        _check_all(
            prop.children, {**prop.engine_default(), **value}, value, node, f"{path}.", scope
        )
    elif prop.type == "fixedCollection":
        for group in prop.groups:
            entries = value.get(group.name)
            if entries is None:
                continue
            rows = entries if isinstance(entries, list) else [entries]
            for index, row in enumerate(rows):
                if not isinstance(row, dict):
                    raise WorkflowValidationError(
                        f"{group.display_name} entries must be objects ({path})", node=node
                    )
                _check_all(
                    group.values,
                    {**_defaults(group.values), **row},
                    row,
                    node,
                    f"{path}.{group.name}[{index}].",
                    scope,
                )
    lowest = prop.type_options.get("minValue") if prop.type == "number" else None
    if lowest is not None and value < lowest:
        raise WorkflowValidationError(
            f"{prop.display_name} must be at least {lowest} ({path})", node=node
        )


def _defaults(props: tuple[Property, ...]) -> dict[str, Any]:
    return {p.name: p.engine_default() for p in props}


def _type_problem(prop: Property, value: Any) -> str | None:
    kind = prop.type
    if kind == "string" and not isinstance(value, str):
        return "must be text"
    if kind == "number" and (isinstance(value, bool) or not isinstance(value, int | float)):
        return "must be a number"
    if kind == "boolean" and not isinstance(value, bool):
        return "must be true or false"
    if kind in ("collection", "fixedCollection", "filter") and not isinstance(value, dict):
        return "must be an object"
    if kind == "resourceMapper" and not isinstance(value, dict):
        return "must be an object"
    if kind == "resourceLocator" and not isinstance(value, str | dict):
        return "must be text or a resource locator"
    return None


def _is_expression(value: Any) -> bool:
    if isinstance(value, dict) and value.get("__rl"):
        value = value.get("value")
    return isinstance(value, str) and value.startswith("=")


def _empty(value: Any) -> bool:
    if isinstance(value, dict) and "__rl" in value:
        value = value.get("value")
    return value is None or (isinstance(value, str) and not value.strip())


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value
