"""Calculator tool (`@n8n/n8n-nodes-langchain.toolCalculator`): safe arithmetic for the Agent.

The expression is parsed with Python's `ast` and walked over an allow-list of number nodes and
operators; nothing is ever evaluated as code. `^` means power, as in n8n's mathjs calculator.
"""

from __future__ import annotations

import ast
import math
import operator
from dataclasses import dataclass, field
from typing import Any

from engine.node import NodeType, register

MAX_INPUT = 1000
MAX_EXPONENT = 1000
MAX_MAGNITUDE = 1e308

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Mod: operator.mod,
    ast.FloorDiv: operator.floordiv,
}
_FUNCTIONS = {
    "sqrt": math.sqrt, "abs": abs, "round": round, "floor": math.floor, "ceil": math.ceil,
    "sin": math.sin, "cos": math.cos, "tan": math.tan, "log": math.log, "log10": math.log10,
    "exp": math.exp, "min": min, "max": max,
}  # fmt: skip
_CONSTANTS = {"pi": math.pi, "e": math.e}


class CalculatorError(ValueError):
    pass


def calculate(expression: str) -> int | float:
    text = expression.strip().replace("^", "**").replace("×", "*").replace("÷", "/")
    if not text or len(text) > MAX_INPUT:
        raise CalculatorError("expected a math expression of at most 1000 characters")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as err:
        raise CalculatorError(f"cannot parse {expression!r}") from err
    return _eval(tree.body)


def _eval(node: ast.AST) -> int | float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _eval(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        return _binary(node)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        func = _FUNCTIONS.get(node.func.id)
        if func:
            return _checked(func(*[_eval(a) for a in node.args]))
    raise CalculatorError(f"unsupported expression: {ast.unparse(node)[:80]}")


def _binary(node: ast.BinOp) -> int | float:
    left, right = _eval(node.left), _eval(node.right)
    if isinstance(node.op, ast.Pow):
        if abs(right) > MAX_EXPONENT:
            raise CalculatorError("exponent too large")
        return _checked(float(left) ** right if abs(left) > 1e6 else left**right)
    op = _BINARY.get(type(node.op))
    if op is None:
        raise CalculatorError("unsupported operator")
    try:
        return _checked(op(left, right))
    except ZeroDivisionError as err:
        raise CalculatorError("division by zero") from err


def _checked(value: Any) -> int | float:
    if isinstance(value, complex) or not isinstance(value, int | float):
        raise CalculatorError("the result is not a real number")
    if abs(value) > MAX_MAGNITUDE:
        raise CalculatorError("the result is too large")
    return value


def format_number(value: int | float) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


@dataclass
class Calculator:
    name: str = "calculator"
    description: str = (
        "Useful for getting the result of a math expression. The input to this tool should be "
        "a valid mathematical expression that could be executed by a simple calculator."
    )
    parameters: dict[str, Any] = field(
        default_factory=lambda: {
            "type": "object",
            "properties": {"input": {"type": "string", "description": "the math expression"}},
            "required": ["input"],
        }
    )

    def call(self, args: dict[str, Any]) -> str:
        expression = args.get("input", "")
        if not isinstance(expression, str):
            expression = str(expression)
        try:
            return format_number(calculate(expression))
        except (CalculatorError, OverflowError, ValueError, TypeError) as err:
            return f"Error: {err}"


@register
class ToolCalculator(NodeType):
    type = "@n8n/n8n-nodes-langchain.toolCalculator"
    kind = "sub"
    sub_output = "ai_tool"

    def supply_data(self, ctx, item_index: int) -> Calculator:
        return Calculator()
