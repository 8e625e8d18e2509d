"""Property-based fuzzing of the two places that evaluate untrusted text: n8n expressions (request
data, workflow parameters) and the Calculator tool (input written by a chat model).

Inputs come from a grammar of the supported forms mixed with garbage, unicode (lone surrogates
included), huge numbers and deep nesting. Each input must give a value or the readable error,
with bounded work: what it allocates is counted (tests/engine/work.py), so a huge number or text
built before it is refused fails the test on any machine. The example budget is small and
derandomized so the suite stays fast and stable.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.errors import ExpressionError
from engine.expressions import ExpressionData, evaluate
from engine.nodes.tool_calculator import Calculator, CalculatorError, calculate, format_number
from tests.engine.work import measured

# What one input may allocate at most: a few of the largest texts the engine's size limits let
# an expression build (1 MB), far below a number or text built before its refusal.
MAX_BYTES = 32 * 1024 * 1024
FUZZ = settings(
    max_examples=300,
    deadline=None,  # work is counted inside the test; wall time varies with the machine
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

SURROGATES = ["\ud800", "\udbff", "\udc00", "\udfff", "\ud83d", "\ude00"]
CHARS = st.one_of(st.characters(), st.sampled_from(SURROGATES))
TEXT = st.text(CHARS, max_size=20)
BIG_DIGITS = st.integers(1, 5_000).map(lambda n: "9" * n)
PUNCTUATION = st.sampled_from(list("()[]{}`'\"$.,;:?!+-*/%<>=&|^~\\ \n") + ["${", "{{", "}}"])
GARBAGE = st.lists(st.one_of(CHARS, PUNCTUATION), max_size=80).map("".join)


# Sizes either side of every limit: nesting 100 and 200, Python's recursion limit (1000) and
# the input lengths (1000 characters for the calculator, 10 000 for an expression).
SIZES = [1, 2, 99, 100, 101, 199, 200, 201, 333, 499, 500, 999, 1_000, 1_999, 3_333, 5_000]
Nesting = tuple[str, str, str]  # (prefix, middle, suffix): prefix * n + middle + suffix * n


def nested(form: Nesting, n: int) -> str:
    prefix, middle, suffix = form
    return prefix * n + middle + suffix * n


def deep(forms: list[Nesting]) -> st.SearchStrategy[str]:
    """One of `forms` repeated n times, from shallow to far past every limit."""
    sizes = st.one_of(st.sampled_from(SIZES), st.integers(1, 5_000))
    return st.tuples(st.sampled_from(forms), sizes).map(lambda pick: nested(*pick))


# -- expressions ----------------------------------------------------------------------------------

DATA = ExpressionData(
    json={
        "s": "a\ud800b\udfffc",
        "n": 3,
        "f": 2.5,
        "digits": "1" * 200_000 + "x",
        "big": "ab" * 50_000,
        "list": [1, "x", None, [2], {"k": "\udc00"}],
        "obj": {"a": {"b": 7}, "s": "\ud800"},
    },
    item_index=0,
    node_items={"Webhook": [{"json": {"body": {"qty": "9" * 20_000}}}]}.get,
    input_items=[{"json": {"i": 0}}],
    now=lambda: 0,
)


def js_string(text: str) -> str:
    escapes = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\r": "\\r"}
    out = []
    for ch in text:
        if "\ud800" <= ch <= "\udfff":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(escapes.get(ch, ch))
    return "'" + "".join(out) + "'"


EXPR_ATOMS = st.one_of(
    st.integers(-(10**30), 10**30).map(str),
    st.floats().map(repr),
    BIG_DIGITS,
    BIG_DIGITS.map(lambda d: "0x" + d),
    TEXT.map(js_string),
    st.sampled_from(
        [
            "$json", "$json.s", "$json.n", "$json.f", "$json.digits", "$json.big", "$json.list",
            "$json.obj", "$json.missing", "$itemIndex", "$input.item.json.i", "$now",
            "$('Webhook').item.json.body.qty", "$('Nope').item", "$node['Webhook'].json",
            "$execution.id", "$workflow", "Math.PI", "null", "undefined", "true", "NaN",
            "Infinity", "[]", "{}", "this", "x", "__proto__",
        ]
    ),
)  # fmt: skip
METHODS = [
    "length", "toUpperCase", "toLowerCase", "trim", "split", "join", "slice", "substring",
    "padStart", "padEnd", "repeat", "replace", "replaceAll", "includes", "indexOf",
    "lastIndexOf", "startsWith", "endsWith", "charAt", "charCodeAt", "at", "concat", "toFixed",
    "toString", "first", "last", "reverse", "keys", "values", "hasOwnProperty", "isEmpty",
    "constructor", "__class__", "nope",
]  # fmt: skip
FUNCTIONS = [
    "String", "Number", "Boolean", "parseInt", "parseFloat", "isNaN", "$ifEmpty", "$if", "$",
    "Math.round", "Math.floor", "Math.pow", "Math.sqrt", "Math.max", "Math.min", "Math.abs",
    "JSON.stringify", "JSON.parse", "Object.keys", "Object.entries", "eval", "open",
]  # fmt: skip
BINARY = ["+", "-", "*", "/", "%", "**", "==", "===", "!=", "<", ">=", "&&", "||", "??"]


def expression_forms(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    args = st.lists(inner, max_size=3).map(", ".join)
    return st.one_of(
        st.tuples(inner, st.sampled_from(BINARY), inner).map(" ".join),
        st.tuples(st.sampled_from(["-", "+", "!", "typeof "]), inner).map("".join),
        inner.map(lambda e: f"({e})"),
        st.tuples(inner, st.sampled_from(METHODS), args).map(lambda t: f"({t[0]}).{t[1]}({t[2]})"),
        st.tuples(inner, st.sampled_from(METHODS)).map(lambda t: f"({t[0]})?.{t[1]}"),
        st.tuples(inner, inner).map(lambda t: f"({t[0]})[{t[1]}]"),
        st.tuples(st.sampled_from(FUNCTIONS), args).map(lambda t: f"{t[0]}({t[1]})"),
        st.tuples(inner, inner, inner).map(lambda t: f"{t[0]} ? {t[1]} : {t[2]}"),
        args.map(lambda a: f"[{a}]"),
        st.tuples(TEXT.map(js_string), inner).map(lambda t: f"{{{t[0]}: {t[1]}}}"),
        st.tuples(TEXT, inner).map(lambda t: "`" + t[0].replace("`", "") + "${" + t[1] + "}`"),
    )


EXPRESSIONS = st.recursive(EXPR_ATOMS, expression_forms, max_leaves=25)
EXPRESSION_NESTINGS: list[Nesting] = [
    ("(", "1", ")"), ("[", "1", "]"), ("{a: ", "1", "}"), ("`${", "1", "}`"), ("-", "1", ""),
    ("!", "1", ""), ("typeof ", "1", ""), ("1**", "1", ""), ("1?", "1", ":1"),
    ("String(", "1", ")"), ("'a'.concat(", "1", ")"), ("", "$json", "?.a"), ("", "$json", ".a"),
    ("", "$json", "[0]"), ("", "1", "+1"), ("", "1", "*1"), ("", "1", "||1"), ("", "0", "&&1"),
    ("", "$json.x", "??null"), ("", "1", "<1"), ("", "'a'", ".length"),
]  # fmt: skip
DEEP_EXPRESSIONS = deep(EXPRESSION_NESTINGS)
TEMPLATES = st.one_of(
    EXPRESSIONS.map(lambda e: "={{ " + e + " }}"),
    DEEP_EXPRESSIONS.map(lambda e: "={{ " + e + " }}"),
    st.tuples(GARBAGE, EXPRESSIONS, GARBAGE).map(lambda t: f"={t[0]}{{{{ {t[1]} }}}}{t[2]}"),
    st.one_of(GARBAGE.map(lambda g: "={{ " + g + " }}"), GARBAGE.map(lambda g: "=" + g)),
)


def check_expression(source: str, count_bytes: bool = True) -> None:
    """`source` gives a value or an ExpressionError of the engine's own, with bounded work."""
    outcome, work = measured(lambda: evaluate(source, DATA), count_bytes)
    if isinstance(outcome, BaseException):
        assert isinstance(outcome, ExpressionError), repr(outcome)
        # The engine wraps an unexpected Python exception as the cause ("could not evaluate
        # expression (TypeError: ...)"), and a RecursionError as the context: neither may happen.
        assert outcome.__cause__ is None, str(outcome)
        assert not isinstance(outcome.__context__, RecursionError | MemoryError), str(outcome)
    assert work.peak_bytes < MAX_BYTES, source[:200]


@FUZZ
@given(source=TEMPLATES)
def test_any_expression_gives_a_value_or_a_readable_error_building_nothing_large(source):
    check_expression(source)


@pytest.mark.parametrize("form", EXPRESSION_NESTINGS, ids=lambda form: nested(form, 2))
def test_every_expression_nesting_at_every_size_gives_a_value_or_a_readable_error(form):
    for n in SIZES:
        check_expression("={{ " + nested(form, n) + " }}", count_bytes=False)


# -- calculator -----------------------------------------------------------------------------------

CALC_FUNCTIONS = [
    "sqrt", "abs", "round", "floor", "ceil", "sin", "cos", "tan", "log", "log10", "exp", "min",
    "max", "pow", "factorial", "__import__", "print",
]  # fmt: skip
CALC_ATOMS = st.one_of(
    st.integers(0, 10**20).map(str),
    st.floats(min_value=0, allow_nan=False).map(repr),
    st.integers(1, 400).map(lambda n: "9" * n),
    st.sampled_from(["pi", "e", "0", "1e308", "1e-308", "0.5", "x", "1j", "True", "'1'"]),
)
CALC_BINARY = ["+", "-", "*", "/", "%", "//", "^", "**", "×", "÷", "<<", "&", "==", "@"]


def calculator_forms(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(inner, st.sampled_from(CALC_BINARY), inner).map(" ".join),
        inner.map(lambda e: f"-{e}"),
        inner.map(lambda e: f"({e})"),
        st.tuples(st.sampled_from(CALC_FUNCTIONS), st.lists(inner, max_size=3)).map(
            lambda t: f"{t[0]}({', '.join(t[1])})"
        ),
    )


CALCULATOR_NESTINGS: list[Nesting] = [
    ("(", "2", ")"), ("-", "2", ""), ("+-", "2", ""), ("2^", "2", ""), ("2**", "2", ""),
    ("(1+", "2", ")"), ("sqrt(", "2", ")"), ("abs(-", "2", ")"), ("max(1,", "2", ")"),
    ("", "1", "+1"), ("", "2", "*2"), ("", "1", "-1"), ("", "1", "/1"), ("", "2", "^1"),
    ("", "(2)", "^(1)"), ("", "1", "%1"),
]  # fmt: skip
CALC_INPUTS = st.one_of(
    st.recursive(CALC_ATOMS, calculator_forms, max_leaves=20),
    st.lists(CALC_ATOMS, min_size=1, max_size=600).map("+".join),
    deep(CALCULATOR_NESTINGS),
    st.tuples(st.sampled_from(CALC_FUNCTIONS), st.lists(st.integers(), max_size=4)).map(
        lambda t: f"{t[0]}({', '.join(map(str, t[1]))})"
    ),
    GARBAGE,
)


def check_calculator(expression: str, count_bytes: bool = True) -> None:
    """The tool answers with text, with bounded work; calculate() gives a finite number or a
    CalculatorError, and the answer says the same."""
    answer, work = measured(lambda: Calculator().call({"input": expression}), count_bytes)
    assert work.peak_bytes < MAX_BYTES, expression[:200]
    assert isinstance(answer, str), repr(answer)
    try:
        value = calculate(expression)
    except CalculatorError as err:
        assert answer == f"Error: {err}"
    else:
        assert isinstance(value, int | float) and value == value and abs(value) <= 1e308
        assert answer == format_number(value)


@FUZZ
@given(expression=CALC_INPUTS)
def test_calculator_answers_any_input_with_text_building_nothing_large(expression):
    check_calculator(expression)


@pytest.mark.parametrize("form", CALCULATOR_NESTINGS, ids=lambda form: nested(form, 2))
def test_every_calculator_nesting_at_every_size_gives_a_number_or_a_readable_error(form):
    for n in SIZES:
        check_calculator(nested(form, n), count_bytes=False)
