"""The work an expression evaluation does, counted rather than timed: the steps its budget was
charged (engine/expression_budget.py) and the bytes it allocated at most."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any
from unittest import mock

from engine import expressions
from engine.expression_budget import Budget


class Work:
    def __init__(self) -> None:
        self.budgets: list[Budget] = []
        self.peak_bytes = 0

    @property
    def steps(self) -> int:
        return sum(budget.steps for budget in self.budgets)


def measured(fn: Callable[[], Any], count_bytes: bool = True) -> tuple[Any, Work]:
    """(what `fn` returned or the exception it raised, the work of the evaluations it ran).
    Counting bytes traces every allocation, which makes `fn` a few times slower."""
    work = Work()

    class Counted(Budget):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            work.budgets.append(self)

    if count_bytes:
        tracemalloc.start()
    try:
        with mock.patch.object(expressions, "Budget", Counted):
            try:
                outcome: Any = fn()
            except Exception as err:  # the caller asserts which
                outcome = err
        if count_bytes:
            work.peak_bytes = tracemalloc.get_traced_memory()[1]
    finally:
        if count_bytes:
            tracemalloc.stop()
    return outcome, work
