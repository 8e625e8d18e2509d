"""Calculator tool (`@n8n/n8n-nodes-langchain.toolCalculator`): safe arithmetic for the Agent.

The expression is parsed with Python's `ast` and walked over an allow-list of number nodes,
operators and functions; nothing is ever evaluated as code. `^` means power, as in n8n's mathjs
calculator.

The input comes from a chat model, so it is treated as hostile, and evaluation is bounded by
construction: the input is at most MAX_INPUT characters, so the tree is small; every number,
literal or result, stays within ±MAX_MAGNITUDE, so an integer has at most 1024 bits; `**` builds
an exact integer only when it fits in 1024 bits, and round() takes at most MAX_ROUND_DIGITS
digits. So each node costs at most a small integer operation. A long flat sum is walked in a
loop; any other nesting recurses at most MAX_DEPTH levels. Every failure is a CalculatorError
with a message the agent can act on.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from engine.description import NodeDescription
from engine.llm import tool_name
from engine.node import NodeType, SupplyDataFunctions
from engine.registry import register

MAX_INPUT = 1000
MAX_EXPONENT = 1000
MAX_MAGNITUDE = 1e308
MAX_DEPTH = 100  # far beyond any real formula, and far below Python's recursion limit
MAX_ROUND_DIGITS = 308  # round(x, -n) computes 10**n; past a double's range it means nothing
_EXACT_POWER_BITS = 1024  # `**` of integers stays exact up to about MAX_MAGNITUDE, floats beyond

_NESTED = f"the expression is nested too deeply (at most {MAX_DEPTH} levels)"
_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Mod: operator.mod,
    ast.FloorDiv: operator.floordiv,
    ast.Pow: lambda x, y: _power(x, y),  # bounded: see _power below
}
_CONSTANTS = {"pi": math.pi, "e": math.e}


class CalculatorError(ValueError):
    pass


def calculate(expression: str) -> int | float:
    text = expression.strip()
    if not text or len(text) > MAX_INPUT:
        raise CalculatorError(f"expected a math expression of at most {MAX_INPUT} characters")
    text = text.replace("^", "**").replace("×", "*").replace("÷", "/")
    tree = _parse(text, expression)
    try:
        return _Walker(text).eval(tree.body)
    except CalculatorError:
        raise
    except RecursionError:  # not reachable within MAX_DEPTH; kept so it never reaches the agent
        raise CalculatorError(_NESTED) from None
    except (ArithmeticError, ValueError, TypeError, MemoryError) as err:
        raise CalculatorError(f"cannot evaluate {expression!r}: {err}") from None


def _parse(text: str, expression: str) -> ast.Expression:
    try:
        return ast.parse(text, mode="eval")
    except (RecursionError, MemoryError):
        raise CalculatorError(_NESTED) from None
    except (SyntaxError, ValueError, OverflowError) as err:  # ValueError: NUL, lone surrogates
        if "too many nested" in str(err):
            raise CalculatorError(_NESTED) from None
        raise CalculatorError(f"cannot parse {expression!r}") from None


class _Walker:
    """Evaluates one parsed expression, counting how deep it has recursed."""

    def __init__(self, source: str):
        self.source = source
        self.depth = 0

    def eval(self, node: ast.AST) -> int | float:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise CalculatorError(_NESTED)
        try:
            return _checked(self.dispatch(node))
        finally:
            self.depth -= 1

    def dispatch(self, node: ast.AST) -> int | float:
        if isinstance(node, ast.Constant) and _is_number(node.value):
            return node.value
        if isinstance(node, ast.Name) and node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            return self.unary(node)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return self.binary(node)
        if isinstance(node, ast.Call) and (name := _function_name(node)) and name in _FUNCTIONS:
            return _call(name, [self.eval(a) for a in node.args])
        shown = (ast.get_source_segment(self.source, node) or type(node).__name__)[:80]
        raise CalculatorError(f"unsupported expression: {shown}")

    def unary(self, node: ast.UnaryOp) -> int | float:
        negative = False
        operand: ast.expr = node
        while isinstance(operand, ast.UnaryOp) and isinstance(operand.op, ast.USub | ast.UAdd):
            negative ^= isinstance(operand.op, ast.USub)
            operand = operand.operand  # `- - -1` is a chain: walk it in a loop, not by recursion
        value = self.eval(operand)
        return -value if negative else value

    def binary(self, node: ast.BinOp) -> int | float:
        # `1+1+...+1` is a left-deep chain as long as the input: walk its left spine in a loop,
        # so only right operands (parentheses, powers) recurse.
        spine: list[ast.BinOp] = []
        left: ast.expr = node
        while isinstance(left, ast.BinOp) and type(left.op) in _BINARY:
            spine.append(left)
            left = left.left
        value = self.eval(left)
        for step in reversed(spine):
            value = _checked(_apply(step.op, value, self.eval(step.right)))
        return value


def _apply(op: ast.operator, left: int | float, right: int | float) -> int | float:
    try:
        return _BINARY[type(op)](left, right)
    except ZeroDivisionError:
        raise CalculatorError("division by zero") from None
    except OverflowError:
        raise CalculatorError("the result is too large") from None


def _power(base: int | float, exponent: int | float) -> int | float:
    if abs(exponent) > MAX_EXPONENT:
        raise CalculatorError("exponent too large")
    if (
        isinstance(base, int)
        and isinstance(exponent, int)
        and exponent >= 0
        and abs(base).bit_length() * exponent <= _EXACT_POWER_BITS
    ):
        return base**exponent
    return float(base) ** exponent  # a complex result is refused by _checked


def _is_number(value: object) -> TypeGuard[int | float]:
    """An int or a float; not a bool, not a complex."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _checked(value: Any) -> int | float:
    if isinstance(value, complex) or not isinstance(value, int | float) or value != value:
        raise CalculatorError("the result is not a real number")
    if abs(value) > MAX_MAGNITUDE:
        raise CalculatorError("the result is too large")
    return value


# -- functions ------------------------------------------------------------------------------------


def _sqrt(x: int | float) -> float:
    if x < 0:
        raise CalculatorError("sqrt() of a negative number is not a real number")
    return math.sqrt(x)


def _log(x: int | float, base: int | float | None = None) -> float:
    if x <= 0:
        raise CalculatorError("log() is defined for positive numbers only")
    if base is None:
        return math.log(x)
    if base <= 0 or base == 1:
        raise CalculatorError("log() needs a positive base other than 1")
    return math.log(x, base)


def _log10(x: int | float) -> float:
    if x <= 0:
        raise CalculatorError("log10() is defined for positive numbers only")
    return math.log10(x)


def _round(x: int | float, digits: int | float | None = None) -> int | float:
    if digits is None:
        return round(x)
    if not float(digits).is_integer() or abs(digits) > MAX_ROUND_DIGITS:
        raise CalculatorError(
            f"round() takes a whole number of digits between {-MAX_ROUND_DIGITS} "
            f"and {MAX_ROUND_DIGITS}"
        )
    return round(x, int(digits))


# name -> (function, fewest arguments, most arguments or None for any number)
_FUNCTIONS: dict[str, tuple[Callable[..., Any], int, int | None]] = {
    "sqrt": (_sqrt, 1, 1), "abs": (abs, 1, 1), "round": (_round, 1, 2),
    "floor": (math.floor, 1, 1), "ceil": (math.ceil, 1, 1), "sin": (math.sin, 1, 1),
    "cos": (math.cos, 1, 1), "tan": (math.tan, 1, 1), "log": (_log, 1, 2),
    "log10": (_log10, 1, 1), "exp": (math.exp, 1, 1),
    "min": (lambda *a: min(a), 1, None), "max": (lambda *a: max(a), 1, None),
}  # fmt: skip


def _function_name(node: ast.Call) -> str | None:
    """`sqrt(2)`: the name of a plain call; None for `f(x=1)`, `a.b()` or `f()()`."""
    return node.func.id if isinstance(node.func, ast.Name) and not node.keywords else None


def _call(name: str, args: list[int | float]) -> int | float:
    func, fewest, most = _FUNCTIONS[name]
    if len(args) < fewest or (most is not None and len(args) > most):
        raise CalculatorError(f"{name}() takes {_arity(fewest, most)}, got {len(args)}")
    try:
        return func(*args)
    except OverflowError:
        raise CalculatorError("the result is too large") from None
    except ValueError as err:
        if isinstance(err, CalculatorError):
            raise
        raise CalculatorError(f"{name}() is not defined for these arguments") from None


def _arity(fewest: int, most: int | None) -> str:
    if most is None:
        return f"at least {fewest} number{'s' * (fewest != 1)}"
    if fewest == most:
        return f"{fewest} number{'s' * (fewest != 1)}"
    return f"{fewest} to {most} numbers"


def format_number(value: int | float) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


@dataclass
class Calculator:
    name: str = "Calculator"  # its node's, as in n8n (engine.llm.tool_name)
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
        if isinstance(expression, int | float):
            expression = str(expression)
        if not isinstance(expression, str):  # str() of a deeply nested list could itself fail
            return "Error: expected a math expression as text"
        try:
            return format_number(calculate(expression))
        except CalculatorError as err:  # calculate() raises nothing else
            return f"Error: {err}"


@register
class ToolCalculator(NodeType):
    type = "@n8n/n8n-nodes-langchain.toolCalculator"
    description = NodeDescription(
        display_name="Calculator",
        group="tool",
        description="Safe arithmetic the Agent can call as a tool.",
        subtitle="tool math calculator",
        inputs=(),
        outputs=("ai_tool",),
    )

    def supply_data(self, ctx: SupplyDataFunctions, item_index: int) -> Calculator:
        return Calculator(name=tool_name(ctx.node.name))
