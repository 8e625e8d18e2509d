"""Hostile input: request data in expressions and model-written Calculator input stay cheap, and
every failure is a readable error, never a Python exception.

Cheap is asserted by the size of the input, not by a clock: each hostile text is a megabyte (or
the size that once took minutes), so a step that is not linear in it would run for hours, and
the test could only end by the suite's timeout, which is there to keep a failure from hanging.
How long each case takes is printed by bench/hostile_input.py. Work the evaluator is charged
for is counted in its own steps."""

from __future__ import annotations

import copy
import math
import sys

import pytest

from engine import expression_values as js
from engine.errors import ExpressionError
from engine.executor import run_workflow
from engine.expression_budget import MAX_STEPS, text_cost
from engine.expressions import ExpressionData, evaluate
from engine.nodes import tool_calculator
from engine.nodes.tool_calculator import Calculator, calculate
from engine.workflow import load_workflow
from tests.workflows import GREETING, example, node

MEGABYTE = 1_000_000
NESTED = "the expression is nested too deeply (at most 100 levels)"


def ev(source: str, **json):
    return evaluate(source, ExpressionData(json=json))


def same(actual, expected) -> bool:
    """Equal and of the same type (5 is not 5.0, True is not 1), with NaN equal to NaN."""
    both_nan = actual != actual and expected != expected
    return both_nan or (actual == expected and type(actual) is type(expected))


# -- 1. number conversion is linear ---------------------------------------------------------------


def test_a_webhook_to_set_workflow_doubles_a_megabyte_numeric_string():
    data = copy.deepcopy(example(GREETING))
    node(data, "Edit Fields")["parameters"]["assignments"]["assignments"] = [
        {"id": "1", "name": "twice", "value": "={{ $json.body.qty * 2 }}", "type": "number"}
    ]
    workflow = load_workflow(data)
    # A number regex that backtracks is quadratic in the digits: on this it would never finish.
    item = {"json": {"body": {"qty": "1" * MEGABYTE + "x"}}}
    run = run_workflow(workflow, [item])
    assert run.status == "success", run.error
    assert math.isnan(run.first_json()["twice"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1" * MEGABYTE + "x", math.nan),
        ("1" * MEGABYTE, math.inf),  # Number("1".repeat(400)) is Infinity in JS too
        ("." + "1" * MEGABYTE + "x", math.nan),
        ("1" * (MEGABYTE // 2) + "." + "1" * (MEGABYTE // 2) + "e", math.nan),
        ("1e" + "1" * MEGABYTE + "x", math.nan),
        ("0x" + "f" * MEGABYTE + "g", math.nan),
        ("0x" + "f" * MEGABYTE, math.inf),
    ],
)
def test_number_conversion_of_a_megabyte_numeric_string(text, expected):
    assert same(ev("={{ $json.qty * 2 }}", qty=text), expected)


def test_parse_float_and_parse_int_of_a_megabyte_of_digits():
    digits = "1" * MEGABYTE + "x"
    result = ev("={{ [parseFloat($json.d), parseInt($json.d)] }}", d=digits)
    assert result == [math.inf, math.inf]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("  ", 0),
        (" \n42\t ", 42),
        ("0x1F", 31),
        ("0X1f", 31),
        ("-0x1F", math.nan),
        ("Infinity", math.inf),
        ("-Infinity", -math.inf),
        ("infinity", math.nan),
        ("1e5", 100_000),
        ("+1.5e-3", 0.0015),
        (".5", 0.5),
        ("5.", 5),
        ("1" * 400, math.inf),
        ("1e", math.nan),
        (".", math.nan),
        ("1_0", math.nan),  # Python's float() takes these; JS Number() does not
        ("nan", math.nan),
        ("١٢", math.nan),
        ("12abc", math.nan),
    ],
)
def test_number_conversion_keeps_js_semantics(text, expected):
    assert same(js.to_number(text), expected)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("parseFloat('3.5e2 apples')", 350),
        ("parseFloat('  -.5x')", -0.5),
        ("parseFloat('1e')", 1),
        ("parseFloat('Infinityx')", math.inf),
        ("parseFloat('x1')", math.nan),
        ("parseInt('ff', 16)", 255),
        ("parseInt('zZ', 36)", 36 * 35 + 35),
        ("parseInt('\u212a', 36)", math.nan),  # KELVIN SIGN lower-cases to "k"; not a digit
        ("parseInt('12', 2)", 1),
    ],
)
def test_parse_float_and_parse_int_read_the_longest_numeric_prefix(source, expected):
    assert same(ev("={{ " + source + " }}"), expected)


def test_integer_literals_past_4300_digits_evaluate_to_infinity():
    assert ev("={{ " + "1" * 5_000 + " }}") == math.inf
    assert ev("={{ 0x" + "f" * 300 + " }}") == math.inf


def test_number_literals_use_ascii_digits_only():
    with pytest.raises(ExpressionError, match='unexpected character "²"'):
        ev("={{ 1² }}")
    assert ev("={{ $json.a['²'] }}", a={"²": 1}) == 1  # a key, not an index


def test_last_index_of_a_long_repetitive_pattern():
    # str.rfind is quadratic on these: about a minute for half their size.
    source = "={{ $json.s.lastIndexOf($json.p) }}"
    assert ev(source, s="a" * 2 * MEGABYTE, p="ab" + "a" * MEGABYTE) == -1


@pytest.mark.parametrize(
    ("source", "expected"), [("'abcabc'.lastIndexOf('bc')", 4), ("'abc'.lastIndexOf('')", 3)]
)
def test_last_index_of_finds_the_last_occurrence(source, expected):
    assert ev("={{ " + source + " }}") == expected


def test_converting_a_big_string_many_times_runs_into_the_step_budget(monkeypatch):
    conversions = []  # operations that read the megabyte
    binary = js.binary

    def counted(op, a, b):
        conversions.extend(x for x in (a, b) if isinstance(x, str) and len(x) == MEGABYTE)
        return binary(op, a, b)

    monkeypatch.setattr(js, "binary", counted)
    source = "={{ " + " + ".join(["$json.q * 1"] * 500) + " }}"
    with pytest.raises(ExpressionError, match="step limit"):
        ev(source, q="1" * MEGABYTE)
    # Each conversion is charged for reading the whole megabyte before it happens.
    assert 0 < len(conversions) <= MAX_STEPS // text_cost(MEGABYTE)


# -- 2. every calculator function is bounded ------------------------------------------------------


def test_calculator_round_with_a_huge_negative_precision_is_refused_before_computing_it():
    answer = Calculator().call({"input": "round(5, -10**7)"})  # 10**10_000_000 took minutes
    assert answer == "Error: round() takes a whole number of digits between -308 and 308"


@pytest.mark.parametrize(
    ("expression", "expected"),
    [("round(1234.5678, 2)", 1234.57), ("round(1234, -2)", 1200), ("round(2.7)", 3)],
)
def test_calculator_round_still_rounds(expression, expected):
    assert calculate(expression) == expected


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("round(5, 0.5)", "round() takes a whole number of digits between -308 and 308"),
        ("sqrt(-4)", "sqrt() of a negative number is not a real number"),
        ("log(0)", "log() is defined for positive numbers only"),
        ("log(-1)", "log() is defined for positive numbers only"),
        ("log(8, 1)", "log() needs a positive base other than 1"),
        ("log10(-10)", "log10() is defined for positive numbers only"),
        ("min()", "min() takes at least 1 number, got 0"),
        ("max()", "max() takes at least 1 number, got 0"),
        ("sqrt(4, 9)", "sqrt() takes 1 number, got 2"),
        ("round(1, 2, 3)", "round() takes 1 to 2 numbers, got 3"),
        ("exp(1000)", "the result is too large"),
        ("0 ^ -1", "division by zero"),
        ("5 % 0", "division by zero"),
        ("(-8) ^ (1/3)", "the result is not a real number"),
        ("1 << 100000", "unsupported expression: 1 << 100000"),
    ],
)
def test_calculator_refuses_bad_arguments_with_a_readable_message(expression, message):
    assert Calculator().call({"input": expression}) == f"Error: {message}"


@pytest.mark.parametrize(
    "expression",
    [
        "1" * 400,  # a 400-digit literal
        "9" * 309 + " * " + "9" * 309,
        "10^308 * 10^308",
        "9^999^999",
        "999999^1000",
        "2^1000 * 2^1000 * 2^1000",
        "1e308 * 10",
        "1e308 // 1e-308",
        "floor(1e308) * floor(1e308)",
        "max(" + ", ".join(["10^300"] * 100) + ") ^ 2",
        "1e999",
    ],
)
def test_calculator_refuses_huge_numbers(expression):
    assert Calculator().call({"input": expression}) == "Error: the result is too large"


def test_calculator_refuses_huge_exponents_before_computing_them():
    assert Calculator().call({"input": "2^1001"}) == "Error: exponent too large"


def test_calculator_keeps_exact_integer_powers():
    assert calculate("2^64") == 18_446_744_073_709_551_616
    assert calculate("3^-1") == pytest.approx(1 / 3)


# -- 3. nesting is bounded, flat chains are loops -------------------------------------------------


def test_calculator_sums_499_terms():
    assert Calculator().call({"input": "+".join(["1"] * 499)}) == "499"


def test_calculator_evaluates_a_flat_expression_of_1000_characters():
    expression = "1" + "+1" * 300 + "-1" * 99 + "*2" * 100
    assert len(expression) == 999
    assert calculate(expression) == 1 + 300 - 98 - 2**100


def test_calculator_walks_a_long_chain_of_signs_in_a_loop():
    assert calculate("-" * 999 + "1") == -1


def test_calculator_deep_parentheses_give_a_readable_error():
    right_deep = "(1+" * 200 + "1" + ")" * 200
    assert Calculator().call({"input": right_deep}) == f"Error: {NESTED}"
    too_many = "(" * 250 + "1" + ")" * 250  # refused by Python's own parser
    assert Calculator().call({"input": too_many}) == f"Error: {NESTED}"
    assert calculate("(" * 150 + "1" + ")" * 150) == 1  # redundant ones add no depth


def test_calculator_turns_a_recursion_error_into_a_readable_message(monkeypatch):
    monkeypatch.setattr(tool_calculator, "MAX_DEPTH", 10_000)  # only the backstop is left
    expression = "2^" * 300 + "1"
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(_frames()) + 200)
    try:
        answer = Calculator().call({"input": expression})
    finally:
        sys.setrecursionlimit(limit)
    assert answer == f"Error: {NESTED}"


def _frames() -> list:
    frame, frames = sys._getframe(), []
    while frame:
        frames.append(frame)
        frame = frame.f_back
    return frames


# -- 4. lone surrogates are ordinary characters ---------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("'\\ud800'", "\ud800"),
        ("'\\ud800'.length", 1),
        ("'a\\ud800'.toUpperCase()", "A\ud800"),
        ("'a\\ud800b'.split('\\ud800')", ["a", "b"]),
        ("'a\\ud800b'.split('')", ["a", "\ud800", "b"]),
        ("'a\\ud800b'.replace('\\ud800', '?')", "a?b"),
        ("'a\\ud800b'.lastIndexOf('\\ud800')", 1),
        ("'a\\ud800b'.includes('\\ud800')", True),
        ("'\\ud800'.charCodeAt(0)", 0xD800),
        ("'\\ud800'.padStart(3, '-')", "--\ud800"),
        ("'\\ud800' < '\\ud801'", True),
        ("'\\ud800' === '\\ud800'", True),
        ("`<${'\\udc00'}>`", "<\udc00>"),
        ("JSON.stringify({s: '\\ud800'})", '{"s":"\ud800"}'),
        ("JSON.parse(JSON.stringify('\\ud800'))", "\ud800"),
        ("JSON.parse('\"\\\\ud800\"')", "\ud800"),
        ("Number('\\ud800')", math.nan),
    ],
)
def test_string_methods_work_on_lone_surrogates(source, expected):
    assert same(ev("={{ " + source + " }}"), expected)


def test_lone_surrogates_in_item_data_pass_through_templates():
    assert ev("=<{{ $json.s }}|{{ $json }}>", s="\udfff") == '<\udfff|{"s":"\udfff"}>'


def test_an_escaped_surrogate_pair_is_one_character_as_in_js():
    text = ev("={{ '\\ud83d\\ude00' + `\\ud83d\\ude00` }}")
    assert text == "😀😀"
    assert text.encode() == "😀😀".encode()


def test_calculator_input_with_a_lone_surrogate_is_a_parse_error():
    assert Calculator().call({"input": "1 + \ud800"}) == "Error: cannot parse '1 + \\ud800'"


# -- the mock model reads user text too -----------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["1" * MEGABYTE + " x", "1 " * (MEGABYTE // 2), "9" * MEGABYTE + "+"]
)
def test_the_mock_model_reads_a_megabyte_of_digits(text):
    from engine.nodes.lm_chat_mock import answer
    from memory.messages import ChatMessage

    # A backtracking arithmetic pattern is quadratic in the digits: on these it would never finish.
    reply = answer([ChatMessage("human", text)], [Calculator()])
    assert reply.content or reply.tool_calls
