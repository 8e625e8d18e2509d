"""What one expression evaluation may spend, and what a value would cost to turn into text.

An evaluation has a step budget: each node of the expression tree visited, each value read and
each character or list slot an operation is about to build is charged before it happens, so a
refusal comes before the work (DESIGN invariant 9). The budget of the evaluation running now is
held in a context variable, so the value functions (expression_values.py, expression_methods.py)
charge it without every call passing it along; outside an evaluation nothing is charged and only
the size limits hold.

Sizes come from a walk over the value that remembers every container it has sized: an array
holding the same 100,000-item object two thousand times is walked once, and its text is known to
be two thousand times too long before a byte of it is built. The walk itself is charged (one
step per container, one per 20 values in it), so sizing cannot become the expensive part.

Every CHECKPOINT_STEPS the budget calls its checkpoint, if it has one: the engine's (which stops
an execution past its CPU time or when it was stopped, and lets other work on the process run)
or the api's (which lets other requests run while an editor's preview evaluates).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from engine.errors import ExpressionError

MAX_STEPS = 100_000  # node visits, values read, and 1 per 100 characters built
CHECKPOINT_STEPS = 2_000  # about a millisecond of evaluation between checkpoints
MAX_WALK_DEPTH = 300  # nesting a size walk follows (bodies may nest 64, expression literals 100)

Checkpoint = Callable[[], None]


class Budget:
    def __init__(self, checkpoint: Checkpoint | None = None, limit: int = MAX_STEPS):
        self.steps = 0
        self.limit = limit
        self.checkpoint = checkpoint
        self._next_checkpoint = CHECKPOINT_STEPS

    def charge(self, amount: int) -> None:
        self.steps += amount
        if self.steps > self.limit:
            raise ExpressionError("expression is too expensive to evaluate (step limit reached)")
        if self.steps >= self._next_checkpoint:
            self._next_checkpoint = self.steps + CHECKPOINT_STEPS
            if self.checkpoint is not None:
                self.checkpoint()


_current: ContextVar[Budget | None] = ContextVar("expression_budget", default=None)


@contextmanager
def active(budget: Budget) -> Iterator[Budget]:
    """Make `budget` the one `spend` charges while the block runs (this thread or greenlet)."""
    token = _current.set(budget)
    try:
        yield budget
    finally:
        _current.reset(token)


def spend(amount: int) -> None:
    """Charge the running evaluation, if any."""
    budget = _current.get()
    if budget is not None and amount > 0:
        budget.charge(amount)


def text_cost(characters: int) -> int:
    """Steps for building (or reading) a text of this many characters."""
    return characters // 100


def items_cost(count: int) -> int:
    """Steps for building (or reading) this many list slots or object entries."""
    return count // 20


# -- sizes before building ------------------------------------------------------------------------

ScalarSize = Callable[[Any], int]


def text_size(value: Any, scalar: ScalarSize) -> int:
    """Characters of JS `String(value)`: arrays join their items with "," (null and undefined
    as nothing), objects are "[object Object]"; `scalar` sizes everything that is no array."""
    memo: dict[int, int] = {}
    walk = _Walk()

    def size(v: list, depth: int) -> int:
        known = memo.get(id(v))
        if known is not None:
            return known
        walk.enter(v, depth)
        memo[id(v)] = 0  # a cycle (never built by an expression) counts as nothing, as in JS
        total = max(len(v) - 1, 0)
        for x in v:  # the common cases inline: this loop runs once per value
            kind = type(x)
            if kind is str:
                total += len(x)
            elif kind is list:
                total += size(x, depth + 1)
            else:
                total += scalar(x)
        memo[id(v)] = total
        return total

    if not isinstance(value, list):
        return scalar(value)
    total = size(value, 0)
    walk.done()
    return total


def json_size(value: Any, indent: int, scalar: ScalarSize) -> int:
    """Characters of JSON.stringify(value, null, indent) (at least: escapes inside strings are
    not counted, so the text built is checked again). `scalar` gives a non-container's JSON
    length. A container is sized once wherever it appears, as (characters on one line, keys,
    line breaks, sum of the breaks' relative depths), from which its size at any depth follows."""
    memo: dict[int, tuple[int, int, int, int]] = {}
    walk = _Walk()

    def shape(v: dict | list, depth: int) -> tuple[int, int, int, int]:
        known = memo.get(id(v))
        if known is not None:
            return known
        walk.enter(v, depth)
        memo[id(v)] = (4, 0, 0, 0)  # a cycle (never built by an expression)
        n = len(v)
        if isinstance(v, dict):
            children: Any = v.values()
            flat = sum(map(len, v)) + 3 * n  # "key": (keys are text, as JSON parses them)
            colons = n
        else:
            children, flat, colons = v, 0, 0
        flat += 2 + max(n - 1, 0)  # brackets and commas
        breaks = n + 1 if n else 0  # one before each child and one before the closing bracket
        depths = n  # each child's first line sits one level deeper
        for child in children:  # the common cases inline: this loop runs once per value
            kind = type(child)
            if kind is str:
                flat += len(child) + 2
            elif kind is dict or kind is list:
                c_flat, c_colons, c_breaks, c_depths = shape(child, depth + 1)
                flat += c_flat
                colons += c_colons
                breaks += c_breaks
                depths += c_depths + c_breaks  # the child's own lines, one level deeper
            else:
                flat += scalar(child)
        memo[id(v)] = (flat, colons, breaks, depths)
        return memo[id(v)]

    if not isinstance(value, dict | list):
        return scalar(value)
    flat, colons, breaks, depths = shape(value, 0)
    walk.done()
    if indent <= 0:
        return flat
    return flat + colons + breaks + indent * depths  # ": " after keys, "\n", the indentation


class _Walk:
    """Charges a size walk: one step per container and one per 20 values in it, spent in
    batches (a walk's steps are most of what sizing costs, so they are few Python calls)."""

    BATCH = 500

    def __init__(self) -> None:
        self.pending = 0

    def enter(self, container: list | dict, depth: int) -> None:
        if depth > MAX_WALK_DEPTH:
            raise ExpressionError("value is nested too deeply to convert to text")
        self.pending += 1 + len(container) // 20
        if self.pending >= self.BATCH:
            self.done()

    def done(self) -> None:
        spend(self.pending)
        self.pending = 0
