"""Bounded work: an expression pays for the bytes it would build before building them,
an execution's CPU time is bounded and checked at checkpoints, a workflow's node count is
bounded at load. Work is counted, never timed: the steps an evaluation was charged, the bytes it
allocated, the checkpoints a run passed (tests/engine/work.py); bench/hostile_input.py prints
how long the same cases take."""

from __future__ import annotations

import json
import re
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import cpu
from engine import expression_values as js
from engine.errors import ExecutionCanceled, ExpressionError, WorkflowValidationError
from engine.executor import run_workflow
from engine.expression_budget import (
    CHECKPOINT_STEPS,
    Budget,
    active,
    json_size,
    text_cost,
    text_size,
)
from engine.expressions import ExpressionData, evaluate
from engine.services import Services
from engine.workflow import Node, load_workflow
from tests.engine.work import Work, measured
from tests.workflows import webhook_to_sets

ROWS = [{"id": i, "name": "x" * 30, "tags": ["a", "b"]} for i in range(12_000)]  # 830 KB of JSON


def refused(source: str, match: str, **json_data) -> Work:
    """Evaluate `source`, which must fail with `match`: the steps it was charged and the bytes
    it allocated at most."""
    error, work = measured(lambda: evaluate(source, ExpressionData(json=json_data)))
    assert isinstance(error, ExpressionError), error
    assert re.search(match, str(error)), str(error)
    return work


def walk_steps(value) -> int:
    """What sizing `value` once is charged: the walk over its containers."""
    with active(Budget()) as budget:
        json_size(value, 0, js.json_scalar_size)
    return budget.steps


def refs(expression: str, count: int) -> str:
    return "[" + ", ".join([expression] * count) + "]"


# -- bytes built are sized and charged before they are built ---------------------------------------


def test_stringify_of_a_thousand_references_to_830_kb_is_refused_before_building_it():
    source = "={{ JSON.stringify(" + refs("$json.r", 1_000) + ", null, 2) }}"
    work = refused(source, r"string too long \(1,", r=ROWS)
    assert work.steps < walk_steps(ROWS) + 5 * 1_000  # the rows are walked once, not 1,000 times
    assert work.peak_bytes < 5_000_000


def test_stringify_of_a_4_mb_body_with_indentation_is_refused_before_building_it():
    body = {"rows": ["y" * 38 for _ in range(100_000)]}  # 4 MB of JSON, 100,000 values
    work = refused("={{ JSON.stringify($json.body, null, 2) }}", r"string too long \(4,", body=body)
    assert work.steps < walk_steps(body) + 10
    assert work.peak_bytes < 2_000_000


def test_an_array_of_references_is_refused_as_a_result_before_it_is_copied_out():
    source = "={{ " + refs("$json.rows", 60) + " }}"  # 50 MB as JSON
    work = refused(source, r"result too large \(", rows=ROWS)
    assert work.steps < walk_steps(ROWS) + 5 * 60
    assert work.peak_bytes < 5_000_000


def test_joining_nested_references_is_refused_before_any_part_is_built():
    source = "={{ " + refs(refs("$json.w", 30), 30) + ".join('-') }}"
    words = ["w" * 20] * 2_000
    work = refused(source, r"string too long \(", w=words)
    assert work.steps < walk_steps(words) + 5 * 30 * 30
    assert work.peak_bytes < 2_000_000


def test_a_template_literal_of_one_long_text_many_times_is_refused_before_joining():
    source = "={{ `" + "${$json.text}" * 500 + "` }}"
    work = refused(source, "string too long", text="t" * 600_000)
    assert work.steps < text_cost(600_000)  # not even one copy of the text is read
    assert work.peak_bytes < 3_000_000


def test_string_concatenation_of_arrays_is_sized_before_it_is_built():
    source = "={{ " + refs("$json.words", 200) + " + '' }}"
    words = ["w" * 100] * 1_000
    work = refused(source, "string too long", words=words)
    assert work.steps < walk_steps(words) + 5 * 200
    assert work.peak_bytes < 1_000_000


def test_object_entries_of_large_objects_runs_into_the_step_budget_before_building_them():
    big = {f"k{i}": i for i in range(100_000)}
    source = "={{ " + refs("Object.entries($json.big).length", 8) + " }}"
    work = refused(source, "step limit", big=big)
    assert work.peak_bytes < 1_000_000  # no list of 100,000 entries was built


def test_repeat_and_pad_are_refused_before_building():
    refused("={{ 'ab'.repeat(600000) }}", "string too long")
    refused("={{ 'a'.padEnd(2000000, 'xy') }}", "string too long")
    many = " + ".join(["'x'.repeat(900000)"] * 12)
    refused("={{ (" + many + ").length }}", "string too long|step limit")


def test_work_under_the_limits_is_built_and_equal_to_plain_json():
    value = evaluate(
        "={{ JSON.stringify($json.rows.slice(0, 2), null, 4) }}",
        ExpressionData(json={"rows": ROWS}),
    )
    assert value == json.dumps(ROWS[:2], indent=4)
    tabbed = evaluate(
        "={{ JSON.stringify($json.o, null, '\\t') }}",
        ExpressionData(json={"o": {"a": [1, {"b": []}]}}),
    )
    assert tabbed == json.dumps({"a": [1, {"b": []}]}, indent="\t")
    assert (
        evaluate("={{ JSON.stringify([1, NaN, 'é']) }}", ExpressionData(json={})) == '[1,null,"é"]'
    )


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53), 2**53),
    st.text(alphabet="abc xyzé€", max_size=8),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(alphabet="kq", max_size=3), inner, max_size=4),
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(value=values, indent=st.sampled_from(["", "  ", "    ", "\t", "--"]))
def test_the_json_size_walk_gives_the_length_of_the_text_built(value, indent):
    expected = json.dumps(value, ensure_ascii=False, indent=indent or None,
                          separators=(",", ": ") if indent else (",", ":"))  # fmt: skip
    assert json_size(value, len(indent), js.json_scalar_size) == len(expected)
    assert js.json_stringify(value, indent or js.UNDEFINED) == expected


@settings(max_examples=300, deadline=None)
@given(value=st.lists(values, max_size=4))
def test_the_text_size_walk_gives_the_length_of_an_arrays_string(value):
    size = text_size(value, lambda v: 0 if js.is_nullish(v) else len(js.to_string(v)))
    assert size == len(js.to_string(value))


# -- checkpoints: an execution's CPU time and its stop --------------------------------------------

HEAVY = "={{ JSON.stringify($('Webhook').item.json.body).length }}"  # walks and builds ~1 MB


def _heavy_run(services: Services, nodes: int = 50, cancel: threading.Event | None = None):
    workflow = load_workflow(webhook_to_sets([HEAVY] * 5, count=nodes))
    item = {"json": {"body": {"rows": ROWS}}}
    return run_workflow(workflow, [item], services=services, cancel=cancel)


class CpuClock:
    """A CPU clock that says the bound is passed from its `over_at`-th reading on, and counts
    how often it was read."""

    def __init__(self, over_at: int):
        self.over_at, self.reads = over_at, 0

    def __call__(self) -> float:
        self.reads += 1
        return 0.0 if self.reads < self.over_at else 1.0


@pytest.fixture
def every_checkpoint_looks(monkeypatch):
    """Every checkpoint looks at the CPU time and pauses (not at most every few ms): what a
    run does at its checkpoints is then the same on any machine."""
    monkeypatch.setattr(cpu, "PAUSE_SECONDS", 0.0)


def test_an_execution_past_its_cpu_seconds_fails_at_the_next_checkpoint_naming_the_setting(
    every_checkpoint_looks,
):
    clock = CpuClock(over_at=100)  # read once as the run starts, then at each checkpoint
    run = _heavy_run(Services(cpu_seconds=0.3, cpu_clock=clock))
    assert run.status == "error"
    assert run.error == (
        "The execution used more than 0.3 s of CPU time (MINI_N8N_EXECUTION_CPU_SECONDS)."
    )
    assert clock.reads == clock.over_at  # ended at the reading that passed the bound
    assert run.error_node is not None and run.error_node.startswith("Set ")
    assert len(run.run_data) < 50  # stopped inside the node, not after every node ran


def test_a_computing_execution_pauses_for_others_within_each_expression(every_checkpoint_looks):
    pauses: list[int] = []
    expression = Budget()  # what one heavy expression is charged, as the run charges it
    with active(expression):
        json_size({"rows": ROWS}, 0, js.json_scalar_size)
    run = _heavy_run(Services(pause=lambda: pauses.append(1)), nodes=3)
    assert run.status == "success", run.error
    # Inside an expression a checkpoint comes every CHECKPOINT_STEPS steps: a heavy one is
    # paused in many times, never run whole between two pauses.
    per_expression = expression.steps // CHECKPOINT_STEPS
    assert per_expression >= 5
    assert len(pauses) >= 3 * 5 * per_expression  # 3 nodes of 5 expressions each


def test_a_stop_during_an_expensive_expression_ends_the_execution_within_its_checkpoints():
    cancel = threading.Event()
    pauses = []

    def pause() -> None:  # the wall-clock timeout's timer, given its turn in a pause
        pauses.append(1)
        if len(pauses) == 3:
            cancel.set()

    run = _heavy_run(Services(pause=pause), nodes=50, cancel=cancel)
    assert run.status == "canceled"
    assert run.error == ExecutionCanceled().message
    assert len(pauses) == 3


def test_a_checkpoint_error_raised_inside_an_expression_is_not_turned_into_an_expression_error():
    def checkpoint() -> None:
        raise ExecutionCanceled()

    with pytest.raises(ExecutionCanceled):
        evaluate("={{ 1 + 1 }}", ExpressionData(json={}, checkpoint=checkpoint))


# -- a workflow's node count ----------------------------------------------------------------------


def test_a_workflow_of_3000_chained_nodes_is_refused_at_load_before_a_node_is_read(monkeypatch):
    data = webhook_to_sets(["={{ 1 }}"], count=2_999)
    read = []
    from_json = Node.from_json
    monkeypatch.setattr(Node, "from_json", lambda *args: read.append(1) or from_json(*args))
    with pytest.raises(WorkflowValidationError) as info:
        load_workflow(data, max_nodes=500)
    assert read == []
    assert str(info.value) == (
        "the workflow has 3,000 nodes; at most 500 are allowed (MINI_N8N_MAX_NODES)"
    )
    assert len(load_workflow(webhook_to_sets(["={{ 1 }}"], count=499), max_nodes=500).nodes) == 500
