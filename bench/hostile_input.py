"""Hostile input, timed: the CPU each case of tests/engine/test_hardening.py and
tests/engine/test_bounded_work.py takes. The tests assert the work counted (steps, bytes, calls);
the figures are here. Each case runs in this thread; its CPU time (best of N) is printed.

    python bench/hostile_input.py [N]
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from _common import pct

from engine.errors import ExpressionError, WorkflowValidationError
from engine.expressions import ExpressionData, evaluate
from engine.nodes.lm_chat_mock import answer
from engine.nodes.tool_calculator import Calculator
from engine.workflow import load_workflow
from memory.messages import ChatMessage
from tests.workflows import webhook_to_sets

MEGABYTE = 1_000_000
ROWS = [{"id": i, "name": "x" * 30, "tags": ["a", "b"]} for i in range(12_000)]  # 830 KB of JSON


def refs(expression: str, count: int) -> str:
    return "[" + ", ".join([expression] * count) + "]"


def expression(source: str, **json: Any) -> Callable[[], Any]:
    def run() -> Any:
        try:
            return evaluate(source, ExpressionData(json=json))
        except ExpressionError as err:  # a refusal is the case's answer
            return err

    return run


LONG_WORKFLOW = webhook_to_sets(["={{ 1 }}"], count=2_999)


def refused_load() -> Any:
    try:
        return load_workflow(LONG_WORKFLOW, max_nodes=500)
    except WorkflowValidationError as err:
        return err


CASES: list[tuple[str, Callable[[], Any]]] = [
    ("number of a megabyte of digits", expression("={{ $json.q * 2 }}", q="1" * MEGABYTE + "x")),
    ("parseFloat, parseInt of a megabyte", expression(
        "={{ [parseFloat($json.d), parseInt($json.d)] }}", d="1" * MEGABYTE + "x")),
    ("lastIndexOf, repetitive pattern", expression(
        "={{ $json.s.lastIndexOf($json.p) }}", s="a" * 2 * MEGABYTE, p="ab" + "a" * MEGABYTE)),
    ("a megabyte converted until the budget", expression(
        "={{ " + " + ".join(["$json.q * 1"] * 500) + " }}", q="1" * MEGABYTE)),
    ("calculator round(5, -10**7)", lambda: Calculator().call({"input": "round(5, -10**7)"})),
    ("calculator 9^999^999", lambda: Calculator().call({"input": "9^999^999"})),
    ("mock model, a megabyte of digits", lambda: answer(
        [ChatMessage("human", "9" * MEGABYTE + "+")], [Calculator()])),
    ("stringify 1,000 refs to 830 KB", expression(
        "={{ JSON.stringify(" + refs("$json.r", 1_000) + ", null, 2) }}", r=ROWS)),
    ("60 refs to 830 KB as a result", expression("={{ " + refs("$json.rows", 60) + " }}",
                                                 rows=ROWS)),
    ("a template of 500 x 600 KB", expression(
        "={{ `" + "${$json.text}" * 500 + "` }}", text="t" * 600_000)),
    ("Object.entries until the budget", expression(
        "={{ " + refs("Object.entries($json.big).length", 8) + " }}",
        big={f"k{i}": i for i in range(100_000)})),
    ("a workflow of 3,000 nodes refused", refused_load),
]  # fmt: skip


def main(n: int) -> None:
    print(f"hostile input: CPU of this thread per case, {n} runs each")
    for name, case in CASES:
        seconds = []
        for _ in range(n):
            started = time.thread_time()
            case()
            seconds.append(time.thread_time() - started)
        ms = [s * 1000 for s in seconds]
        print(f"{name:<40} best {min(ms):8.2f} ms   p50 {pct(ms, 50):8.2f} ms")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
