"""n8n expressions: parameter values starting with `=`, such as `={{ $json.sessionId }}`.

The text after `=` is a template: literal text with `{{ expr }}` segments. A template that is
exactly one segment returns the raw value (a number stays a number); otherwise the segments are
turned into strings and joined with the text.

Evaluation is safe by construction (DESIGN invariant 7): a tree walker over plain values (dict,
list, str, int/float, bool, None). Property access reads dict keys and list/string indices only;
methods come from fixed allow-lists per JS type; no Python attribute is ever looked up, nothing is
imported, and `eval`/`exec`/`compile` are never used. Text length, nesting, produced string and
list sizes and the number of evaluation steps are all bounded, and every failure is an
ExpressionError. What an operation would build is sized and charged before it is built
(expression_budget.py), so a refusal costs little whatever the expression asks for; a caller's
checkpoint runs every few thousand steps (an execution's CPU bound, other requests' turn).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from engine import expression_values as js
from engine.errors import EngineError, ExpressionError
from engine.expression_budget import Budget, Checkpoint, active, json_size
from engine.expression_methods import FUNCTIONS, find_method
from engine.expression_parser import parse_template
from engine.expression_values import UNDEFINED, NodeRef

MAX_EXPRESSION_LENGTH = 10_000  # characters after the "="; real parameters are far shorter
MAX_EVAL_DEPTH = 200  # tree depth the walker recurses into (a sum of many terms is a loop)
# Characters of an expression's result as JSON: twice the largest request body (16 MiB), so a
# body passes through a node whole, but an array of a thousand references to it does not.
MAX_RESULT_CHARACTERS = 32 * 1024 * 1024


@dataclass
class ExpressionData:
    """What an expression can see. The engine builds one per node and item."""

    json: dict  # $json: the current item's json
    item_index: int = 0  # $itemIndex
    parameters: dict = field(default_factory=dict)  # $parameter: the node's raw parameters
    # items ({"json": ...}) of the named node's latest run (main output 0); None if it did not run
    node_items: Callable[[str], list[dict] | None] = lambda name: None
    input_items: list[dict] = field(default_factory=list)  # $input: the current node's input
    execution_id: str | None = None  # $execution.id
    workflow: dict = field(default_factory=dict)  # $workflow: {"id", "name", "active"}
    now: Callable[[], float | str] | None = None  # $now: epoch seconds or an ISO string
    # Called every few thousand steps: may raise an EngineError (the execution is over its CPU
    # time, or stopped), which ends the evaluation as it is, or let other work run meanwhile.
    checkpoint: Checkpoint | None = None
    # An expression that gives `undefined` answers UNDEFINED instead of None (null): a
    # condition compares the two differently (engine/conditions.py).
    keep_undefined: bool = False


def is_expression(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("=")


def has_expression(value: Any) -> bool:
    """Whether an expression is anywhere in a value (what `resolve` would evaluate)."""
    if isinstance(value, dict):
        return any(map(has_expression, value.values()))
    if isinstance(value, list):
        return any(map(has_expression, value))
    return is_expression(value)


def evaluate(value: Any, data: ExpressionData) -> Any:
    """Evaluate `value` if it is an expression string; return anything else unchanged."""
    if not is_expression(value):
        return value
    text = value[1:]
    try:
        if len(text) > MAX_EXPRESSION_LENGTH:
            raise ExpressionError(
                f"expression is too long ({len(text)} characters; the limit is "
                f"{MAX_EXPRESSION_LENGTH})"
            )
        if data.checkpoint is not None:
            data.checkpoint()
        with active(Budget(data.checkpoint)) as budget:
            return _Evaluator(data, budget).template(parse_template(text))
    except ExpressionError as exc:
        if exc.expression is None:
            exc.expression = _shorten(value)
        raise
    except RecursionError:
        raise ExpressionError(
            "expression is nested too deeply", expression=_shorten(value)
        ) from None
    except EngineError:  # from the checkpoint: the execution's limits, not the expression's
        raise
    except Exception as exc:  # never let a Python error escape as anything but ExpressionError
        message = f"could not evaluate expression ({type(exc).__name__}: {exc})"
        raise ExpressionError(_shorten(message), expression=_shorten(value)) from exc


def resolve(value: Any, data: ExpressionData, _path: str = "") -> Any:
    """Like `evaluate`, but recurses into dicts and lists and returns a new structure. An error
    names the parameter path (e.g. `options.systemMessage`) unless it already names one."""
    if isinstance(value, dict):
        return {k: resolve(v, data, f"{_path}.{k}" if _path else str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, data, f"{_path}[{i}]") for i, v in enumerate(value)]
    try:
        return evaluate(value, data)
    except ExpressionError as exc:
        if exc.parameter is None and _path:
            exc.parameter = _path
        raise


def _shorten(source: str) -> str:
    return source if len(source) <= 200 else source[:200] + "..."


class _ShortCircuit(Exception):
    """`?.` met null or undefined: the whole optional chain is undefined."""


class _Evaluator:
    def __init__(self, data: ExpressionData, budget: Budget):
        self.data = data
        self.budget = budget
        self.depth = 0

    # -- entry points -----------------------------------------------------------------------------

    def template(self, parts: tuple) -> Any:
        if len(parts) == 1 and parts[0][0] == "expr":
            return self.export(self.eval(parts[0][1]))
        out, size = [], 0
        for kind, part in parts:
            text = part if kind == "text" else js.segment_string(self.eval(part))
            size += len(text)
            js.check_length(size)
            out.append(text)
        self.charge(size // 100)
        return "".join(out)

    def export(self, value: Any) -> Any:
        """The raw result handed to the engine: plain values only, containers copied so a node
        changing its parameter cannot change another node's data. Its size as JSON is checked
        first: references to one value cost nothing here but are copied out in full wherever
        the result is stored or sent."""
        if isinstance(value, dict | list):
            size = json_size(value, 0, js.json_scalar_size)
            if size > MAX_RESULT_CHARACTERS:
                raise ExpressionError(
                    f"result too large ({size:,} > {MAX_RESULT_CHARACTERS:,} characters as JSON)"
                )
            return copy.deepcopy(value)
        if value is UNDEFINED and self.data.keep_undefined:
            return UNDEFINED
        return js.stored(value)

    def charge(self, amount: int) -> None:
        self.budget.charge(amount)

    def eval(self, node: tuple) -> Any:
        self.charge(1)
        self.depth += 1
        if self.depth > MAX_EVAL_DEPTH:
            raise ExpressionError("expression is nested too deeply")
        try:
            return _HANDLERS[node[0]](self, node)
        finally:
            self.depth -= 1

    # -- node kinds -------------------------------------------------------------------------------

    def ev_lit(self, node: tuple) -> Any:
        return node[1]

    def ev_undef(self, node: tuple) -> Any:
        return UNDEFINED

    def ev_name(self, node: tuple) -> Any:
        return self.variable(node[1])

    def ev_tmpl(self, node: tuple) -> str:
        out, size = [], 0
        for part in node[1]:
            text = part if isinstance(part, str) else js.to_string(self.eval(part))
            size += len(text)
            js.check_length(size)  # before joining: the parts may be one long text many times
            out.append(text)
        return self.sized("".join(out))

    def ev_array(self, node: tuple) -> list:
        return [js.stored(self.eval(e)) for e in node[1]]

    def ev_object(self, node: tuple) -> dict:
        return {key: js.stored(self.eval(value)) for key, value in node[1]}

    def ev_chain(self, node: tuple) -> Any:
        try:
            return self.eval(node[1])
        except _ShortCircuit:
            return UNDEFINED

    def ev_member(self, node: tuple) -> Any:
        _, obj_node, key_node, optional = node
        obj = self.eval(obj_node)
        if optional and js.is_nullish(obj):
            raise _ShortCircuit
        key = self.eval(key_node)
        if isinstance(obj, js.NodeTable):
            return self.node_item(js.to_string(key))
        return js.get_property(obj, key)

    def ev_call(self, node: tuple) -> Any:
        _, callee, arg_nodes, optional = node
        if callee[0] == "name":
            args = [self.eval(a) for a in arg_nodes]
            return self.call_function(callee[1], args)
        if callee[0] != "member":
            raise ExpressionError("this expression is not a function and cannot be called")
        obj = self.eval(callee[1])
        if callee[3] and js.is_nullish(obj):
            raise _ShortCircuit
        name = js.to_string(self.eval(callee[2]))
        if js.is_nullish(obj):
            raise ExpressionError(
                f"Cannot read properties of {js.to_string(obj)} (reading '{name}')"
            )
        method = find_method(obj, name)
        if method is None:
            if optional:
                raise _ShortCircuit
            raise ExpressionError(f'unsupported method "{name}" on {js.describe(obj)}')
        args = [self.eval(a) for a in arg_nodes]
        self.charge(js.cost(obj) + sum(js.cost(a) for a in args))
        return self.sized(method(obj, args))

    def ev_unary(self, node: tuple) -> Any:
        _, op, operand = node
        value = self.eval(operand)
        if op == "!":
            return not js.truthy(value)
        if op == "typeof":
            return js.type_of(value)
        self.charge(js.cost(value))  # converting a big string to a number reads all of it
        number = js.to_number(value)
        return js.normalize(-number if op == "-" else number)

    def ev_binary(self, node: tuple) -> Any:
        # Walk a left-deep chain (`a + b + c + ...`) in a loop so long sums cost no recursion.
        spine = []
        while node[0] == "binary":
            spine.append(node)
            node = node[2]
        self.charge(len(spine))
        value = self.eval(node)
        for _, op, _, right in reversed(spine):
            other = self.eval(right)
            # Comparing or converting a big string reads all of it: charge for that, so a sum
            # of many `$json.big * 1` terms cannot multiply a linear cost past the budget.
            self.charge(js.cost(value) + js.cost(other))
            value = self.sized(js.binary(op, value, other))
        return value

    def ev_logical(self, node: tuple) -> Any:
        # A left-deep chain (`a || b || c || ...`) is walked in a loop, like ev_binary.
        spine = []
        while node[0] == "logical":
            spine.append(node)
            node = node[2]
        self.charge(len(spine))
        value = self.eval(node)
        for _, op, _, right in reversed(spine):
            if op == "&&":
                value = self.eval(right) if js.truthy(value) else value
            elif op == "||":
                value = value if js.truthy(value) else self.eval(right)
            else:  # ??
                value = self.eval(right) if js.is_nullish(value) else value
        return value

    def ev_cond(self, node: tuple) -> Any:
        _, test, then, otherwise = node
        return self.eval(then) if js.truthy(self.eval(test)) else self.eval(otherwise)

    def sized(self, value: Any) -> Any:
        """Bound what an operation produced, and charge for large results."""
        if isinstance(value, str | list):
            js.check_length(len(value), is_list=isinstance(value, list))
            self.charge(js.cost(value))
        return value

    # -- n8n variables ----------------------------------------------------------------------------

    def variable(self, name: str) -> Any:
        data = self.data
        simple = {
            "$json": lambda: data.json,
            "$parameter": lambda: data.parameters,
            "$itemIndex": lambda: data.item_index,
            "$execution": lambda: {"id": data.execution_id},
            "$workflow": lambda: data.workflow,
            "$input": lambda: NodeRef("$input", data.input_items, data.item_index),
            "$node": lambda: js.NODE_TABLE,
            "$now": self.now,
        }
        if name in simple:
            return simple[name]()
        if name in js.NAMESPACES:
            return js.NAMESPACES[name]
        if name in FUNCTIONS or name == "$":
            raise ExpressionError(f'"{name}" is a function; call it, e.g. {name}(...)')
        raise ExpressionError(f'unknown variable "{name}"')

    def call_function(self, name: str, args: list) -> Any:
        if name == "$":
            node_name = args[0] if args else UNDEFINED
            if not isinstance(node_name, str):
                raise ExpressionError("$() takes a node name, e.g. $('Chat Trigger')")
            return NodeRef(node_name, self.run_items(node_name), self.data.item_index)
        function = FUNCTIONS.get(name)
        if function is None:
            raise ExpressionError(f'unsupported function "{name}"')
        self.charge(sum(js.cost(a) for a in args))
        return self.sized(function(args))

    def run_items(self, node_name: str) -> list[dict]:
        items = self.data.node_items(node_name)
        if items is None:
            raise ExpressionError(
                f'no data for node "{node_name}": it does not exist or has not run yet'
            )
        return items

    def node_item(self, node_name: str) -> Any:
        """`$node["Name"]`: the item at the current index, falling back to the first."""
        return NodeRef(node_name, self.run_items(node_name), self.data.item_index).item()

    def now(self) -> str:
        value = self.data.now() if self.data.now else time.time()
        if isinstance(value, str):
            return value
        stamp = datetime.fromtimestamp(value, UTC)
        return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


_HANDLERS: dict[str, Callable[[_Evaluator, tuple], Any]] = {
    "lit": _Evaluator.ev_lit,
    "undef": _Evaluator.ev_undef,
    "name": _Evaluator.ev_name,
    "tmpl": _Evaluator.ev_tmpl,
    "array": _Evaluator.ev_array,
    "object": _Evaluator.ev_object,
    "chain": _Evaluator.ev_chain,
    "member": _Evaluator.ev_member,
    "call": _Evaluator.ev_call,
    "unary": _Evaluator.ev_unary,
    "binary": _Evaluator.ev_binary,
    "logical": _Evaluator.ev_logical,
    "cond": _Evaluator.ev_cond,
}
