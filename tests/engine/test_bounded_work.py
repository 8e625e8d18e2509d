"""Issue 23, bounded work: an expression pays for the bytes it would build before building them,
an execution's CPU time is bounded and checked at checkpoints, a workflow's node count is
bounded at load. CPU figures are process time, so a busy machine does not fail them."""

from __future__ import annotations

import json
import threading
import time
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import expression_values as js
from engine.errors import ExecutionCanceled, ExpressionError, WorkflowValidationError
from engine.executor import run_workflow
from engine.expression_budget import json_size, text_size
from engine.expressions import ExpressionData, evaluate
from engine.services import Services
from engine.workflow import load_workflow
from tests.workflows import webhook_to_sets

ROWS = [{"id": i, "name": "x" * 30, "tags": ["a", "b"]} for i in range(12_000)]  # 830 KB of JSON


def refused(source: str, match: str, **json_data) -> tuple[float, int]:
    """Evaluate `source`, which must fail with `match`: (CPU seconds, peak bytes allocated while
    evaluating it again with allocations traced)."""
    started = time.process_time()
    with pytest.raises(ExpressionError, match=match):
        evaluate(source, ExpressionData(json=json_data))
    seconds = time.process_time() - started
    tracemalloc.start()
    try:
        with pytest.raises(ExpressionError, match=match):
            evaluate(source, ExpressionData(json=json_data))
        return seconds, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def refs(expression: str, count: int) -> str:
    return "[" + ", ".join([expression] * count) + "]"


# -- bytes built are sized and charged before they are built ---------------------------------------


def test_stringify_of_a_thousand_references_to_830_kb_is_refused_before_building_it():
    source = "={{ JSON.stringify(" + refs("$json.r", 1_000) + ", null, 2) }}"
    seconds, peak = refused(source, r"string too long \(1,", r=ROWS)
    assert seconds < 0.5  # the rows are walked once; was minutes and gigabytes
    assert peak < 5_000_000


def test_stringify_of_a_4_mb_body_with_indentation_is_refused_before_building_it():
    body = {"rows": ["y" * 38 for _ in range(100_000)]}  # 4 MB of JSON, 100,000 values
    seconds, peak = refused(
        "={{ JSON.stringify($json.body, null, 2) }}", r"string too long \(4,", body=body
    )
    assert seconds < 0.3
    assert peak < 2_000_000


def test_an_array_of_references_is_refused_as_a_result_before_it_is_copied_out():
    source = "={{ " + refs("$json.rows", 60) + " }}"  # 50 MB as JSON
    seconds, peak = refused(source, r"result too large \(", rows=ROWS)
    assert seconds < 0.5
    assert peak < 5_000_000


def test_joining_nested_references_is_refused_before_any_part_is_built():
    source = "={{ " + refs(refs("$json.w", 30), 30) + ".join('-') }}"
    seconds, peak = refused(source, r"string too long \(", w=["w" * 20] * 2_000)
    assert seconds < 0.2
    assert peak < 2_000_000


def test_a_template_literal_of_one_long_text_many_times_is_refused_before_joining():
    source = "={{ `" + "${$json.text}" * 500 + "` }}"
    seconds, peak = refused(source, "string too long", text="t" * 600_000)
    assert seconds < 0.2
    assert peak < 3_000_000


def test_string_concatenation_of_arrays_is_sized_before_it_is_built():
    source = "={{ " + refs("$json.words", 200) + " + '' }}"
    seconds, _ = refused(source, "string too long", words=["w" * 100] * 1_000)
    assert seconds < 0.2


def test_object_entries_of_large_objects_runs_into_the_step_budget_before_building_them():
    big = {f"k{i}": i for i in range(100_000)}
    source = "={{ " + refs("Object.entries($json.big).length", 8) + " }}"
    seconds, _ = refused(source, "step limit", big=big)
    assert seconds < 1.0


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


def test_an_execution_past_its_cpu_seconds_fails_naming_the_setting():
    started = time.process_time()
    run = _heavy_run(Services(cpu_seconds=0.3))
    used = time.process_time() - started
    assert run.status == "error"
    assert run.error == (
        "The execution used more than 0.3 s of CPU time (MINI_N8N_EXECUTION_CPU_SECONDS)."
    )
    assert run.error_node is not None and run.error_node.startswith("Set ")
    assert used < 0.3 + 0.5  # stopped within a node or two of the bound, not after 50 nodes


def test_a_computing_execution_pauses_for_others_every_few_milliseconds():
    pauses: list[float] = []
    run = _heavy_run(Services(pause=lambda: pauses.append(time.monotonic())), nodes=3)
    assert run.status == "success", run.error
    gaps = [b - a for a, b in zip(pauses, pauses[1:], strict=False)]
    assert len(pauses) >= 10
    assert max(gaps) < 0.25  # under load a gap may hold a descheduled moment, never a node


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


def test_a_workflow_of_3000_chained_nodes_is_refused_at_load_naming_the_limit():
    data = webhook_to_sets(["={{ 1 }}"], count=2_999)
    started = time.process_time()
    with pytest.raises(WorkflowValidationError) as info:
        load_workflow(data, max_nodes=500)
    assert time.process_time() - started < 0.05
    assert str(info.value) == (
        "the workflow has 3,000 nodes; at most 500 are allowed (MINI_N8N_MAX_NODES)"
    )
    assert len(load_workflow(webhook_to_sets(["={{ 1 }}"], count=499), max_nodes=500).nodes) == 500
