"""n8n expressions: the forms workflows use, JS semantics, and safety against injection."""

from __future__ import annotations

import math
import re

import pytest

from engine.errors import ExpressionError
from engine.expressions import ExpressionData, evaluate, is_expression, resolve
from tests.engine.work import measured

RUNS = {
    "Chat Trigger": [
        {"json": {"sessionId": "s-1", "chatInput": "hello"}},
        {"json": {"sessionId": "s-2", "chatInput": "again"}},
    ],
    "Empty": [],
}


def make_data(item_index: int = 0, **json) -> ExpressionData:
    return ExpressionData(
        json={"name": "Ann", "n": 3, "price": 2.5, "a": {"b": {"c": 7}}, "tags": ["x", "y"]} | json,
        item_index=item_index,
        parameters={"sessionKey": "={{ $json.sessionId }}", "contextWindowLength": 5},
        node_items=RUNS.get,
        input_items=[{"json": {"i": 0}}, {"json": {"i": 1}}],
        execution_id="exec-42",
        workflow={"id": "wf-1", "name": "Support bot", "active": True},
        now=lambda: 0,
    )


def ev(source: str, data: ExpressionData | None = None):
    return evaluate(source, data or make_data())


def raises(source: str, match: str, data: ExpressionData | None = None) -> ExpressionError:
    with pytest.raises(ExpressionError, match=match) as info:
        ev(source, data)
    return info.value


# -- what is an expression ------------------------------------------------------------------------


def test_only_strings_starting_with_equals_are_expressions():
    assert is_expression("={{ 1 }}") and is_expression("=plain")
    assert not is_expression("{{ 1 }}") and not is_expression(5) and not is_expression(None)


def test_non_expressions_are_returned_unchanged():
    data = make_data()
    for value in ("{{ $json.name }}", 5, None, {"a": 1}, ["=x"]):
        assert evaluate(value, data) is value


def test_equals_without_braces_is_literal_text():
    assert ev("=just text") == "just text"
    assert ev("=") == ""


# -- templates ------------------------------------------------------------------------------------


def test_single_segment_returns_the_raw_value():
    assert ev("={{ $json.n }}") == 3
    assert ev("={{$json.a}}") == {"b": {"c": 7}}
    assert ev("={{ $json.tags }}") == ["x", "y"]
    assert ev("={{ true }}") is True
    assert ev("={{ null }}") is None


def test_missing_value_in_single_segment_is_none():
    assert ev("={{ $json.nope }}") is None


def test_text_around_segments_is_concatenated_as_strings():
    assert ev("=Hello {{ $json.name }}, you have {{ $json.n }} items") == (
        "Hello Ann, you have 3 items"
    )
    assert ev("= {{ $json.n }}") == " 3"


def test_objects_and_arrays_appear_as_json_inside_text():
    assert ev("=a={{ $json.a }} t={{ $json.tags }}") == 'a={"b":{"c":7}} t=["x","y"]'


def test_undefined_appears_as_nothing_and_null_as_null_inside_text():
    assert ev("=[{{ $json.nope }}|{{ null }}]") == "[|]"  # as n8n 2.41.1 writes them


def test_numbers_and_booleans_appear_js_style_inside_text():
    assert ev("={{ 6 / 3 }} {{ 0.5 }} {{ 1e21 }} {{ 1e-7 }} {{ 1/0 }} {{ true }}") == (
        "2 0.5 1e+21 1e-7 Infinity true"
    )


def test_braces_inside_strings_and_object_literals_do_not_end_a_segment():
    assert ev("={{ '}}' + \"{{\" }}") == "}}{{"
    assert ev("={{ {a: {b: 1}} }}") == {"a": {"b": 1}}


def test_unclosed_segment_is_an_error():
    raises("=Hello {{ $json.name", 'missing closing "}}"')


# -- n8n variables --------------------------------------------------------------------------------


def test_json_member_and_index_access():
    assert ev("={{ $json.a.b.c }}") == 7
    assert ev("={{ $json['a'][\"b\"].c }}") == 7
    assert ev("={{ $json.tags[1] }}") == "y"
    assert ev("={{ $json.tags.length }}") == 2


def test_parameter_gives_the_raw_node_parameters():
    assert ev("={{ $parameter.contextWindowLength }}") == 5
    assert ev("={{ $parameter['sessionKey'] }}") == "={{ $json.sessionId }}"


def test_node_by_name_takes_the_item_at_the_current_index():
    assert ev("={{ $node['Chat Trigger'].json.sessionId }}") == "s-1"
    assert ev('={{ $node["Chat Trigger"].json.sessionId }}', make_data(item_index=1)) == "s-2"


def test_node_by_name_falls_back_to_the_first_item():
    assert ev("={{ $node['Chat Trigger'].json.sessionId }}", make_data(item_index=5)) == "s-1"


def test_dollar_function_item_first_last_and_all():
    data = make_data(item_index=1)
    assert ev("={{ $('Chat Trigger').item.json.chatInput }}", data) == "again"
    assert ev("={{ $('Chat Trigger').first().json.sessionId }}", data) == "s-1"
    assert ev("={{ $('Chat Trigger').last().json.sessionId }}") == "s-2"
    assert ev("={{ $('Chat Trigger').all().length }}") == 2
    assert ev("={{ $('Chat Trigger').all()[0].json }}") == {
        "sessionId": "s-1",
        "chatInput": "hello",
    }


def test_node_without_items_gives_undefined_items():
    assert ev("={{ $('Empty').first() }}") is None
    assert ev("={{ $('Empty').all() }}") == []


def test_unknown_node_is_a_clear_error():
    raises("={{ $('Nope').item.json }}", 'no data for node "Nope"')
    raises("={{ $node['Nope'].json }}", 'no data for node "Nope"')


def test_input_item_first_and_all():
    data = make_data(item_index=1)
    assert ev("={{ $input.item.json.i }}", data) == 1
    assert ev("={{ $input.first().json }}", data) == {"i": 0}
    assert ev("={{ $input.all() }}") == [{"json": {"i": 0}}, {"json": {"i": 1}}]


def test_execution_workflow_and_item_index():
    data = make_data(item_index=1)
    assert ev("={{ $execution.id }}", data) == "exec-42"
    assert ev("={{ $workflow.id }}/{{ $workflow.name }}", data) == "wf-1/Support bot"
    assert ev("={{ $itemIndex }}", data) == 1


def test_now_is_an_iso_timestamp():
    assert ev("={{ $now }}") == "1970-01-01T00:00:00.000Z"


def test_raw_objects_are_copies_of_the_item_data():
    data = make_data()
    result = evaluate("={{ $json.a }}", data)
    result["b"] = "changed"
    assert data.json["a"] == {"b": {"c": 7}}


# -- JS semantics ---------------------------------------------------------------------------------


def test_missing_property_is_undefined_but_reading_through_it_is_an_error():
    assert ev("={{ $json.nope === undefined }}") is True
    raises("={{ $json.nope.x }}", r"Cannot read properties of undefined \(reading 'x'\)")
    raises("={{ $json.gone.x }}", "reading 'x'", make_data(gone=None))


def test_optional_chaining_short_circuits_the_whole_chain():
    assert ev("={{ $json.nope?.x.y.z }}") is None
    assert ev("={{ $json.nope?.['x'] }}") is None
    assert ev("={{ $json.nope?.toUpperCase() }}") is None
    assert ev("={{ $json.name?.toUpperCase() }}") == "ANN"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("$json.nope ?? 'default'", "default"),
        ("0 ?? 'default'", 0),
        ("'' || 'fallback'", "fallback"),
        ("$json.name || 'fallback'", "Ann"),
        ("1 && 'yes'", "yes"),
        ("0 && 'yes'", 0),
        ("!$json.n", False),
        ("!![]", True),
        ("!!{}", True),
        ("$json.n > 2 ? 'many' : 'few'", "many"),
        ("$json.n > 5 ? 'many' : $json.n > 1 ? 'some' : 'few'", "some"),
    ],
)
def test_logical_and_conditional_operators(source, expected):
    assert ev("={{ " + source + " }}") == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("1 === 1", True),
        ("1 === '1'", False),
        ("1 == '1'", True),
        ("null == undefined", True),
        ("null === undefined", False),
        ("0 == false", True),
        ("'a' !== 'b'", True),
        ("1 != '1'", False),
        ("NaN === NaN", False),
        ("2 < 10", True),
        ("'2' < '10'", False),
        ("'b' >= 'a'", True),
        ("'3' <= 3", True),
        ("undefined < 1", False),
    ],
)
def test_comparisons_follow_js(source, expected):
    assert ev("={{ " + source + " }}") is expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("1 + 2", 3),
        ("1 + '2'", "12"),
        ("'n=' + 1.5", "n=1.5"),
        ("'' + null + true", "nulltrue"),
        ("[1, 2] + ''", "1,2"),
        ("'5' * '2'", 10),
        ("7 - 10", -3),
        ("7 / 2", 3.5),
        ("6 / 3", 2),
        ("-7 % 3", -1),
        ("2 ** 10", 1024),
        ("2 ** 3 ** 2", 512),
        ("(-2) ** 2", 4),
        ("-$json.n", -3),
        ("+'4'", 4),
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("0.1 + 0.2", 0.30000000000000004),
    ],
)
def test_arithmetic_follows_js(source, expected):
    assert ev("={{ " + source + " }}") == expected


def test_division_by_zero_gives_infinity_and_nan():
    assert ev("={{ 1 / 0 }}") == math.inf
    assert math.isnan(ev("={{ 0 / 0 }}"))
    assert math.isnan(ev("={{ 'abc' - 1 }}"))


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("'single'", "single"),
        ('"double"', "double"),
        ("`back`", "back"),
        ("`sum=${1 + 2}, name=${$json.name}`", "sum=3, name=Ann"),
        ("'it\\'s\\n'", "it's\n"),
        ("'\\u00e9'", "é"),
        ("42", 42),
        ("1.5e3", 1500),
        ("0x1f", 31),
        ("true", True),
        ("false", False),
        ("null", None),
        ("undefined", None),
        ("[1, 'a', [null]]", [1, "a", [None]]),
        ("{a: 1, 'b c': [2], 3: $json.n}", {"a": 1, "b c": [2], "3": 3}),
        ("[]", []),
        ("{}", {}),
        ("typeof $json.name", "string"),
    ],
)
def test_literals(source, expected):
    assert ev("={{ " + source + " }}") == expected


# -- methods and globals --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("'Ab'.toUpperCase() + 'Ab'.toLowerCase()", "ABab"),
        ("'  x  '.trim() + '|' + '  x'.trimStart() + '|' + 'x  '.trimEnd()", "x|x|x"),
        ("'hello'.includes('ell')", True),
        ("'hello'.startsWith('he') && 'hello'.endsWith('lo')", True),
        ("'a,b,c'.split(',')", ["a", "b", "c"]),
        ("'abc'.split('')", ["a", "b", "c"]),
        ("'a-b-c'.replace('-', '+')", "a+b-c"),
        ("'a-b-c'.replaceAll('-', '+')", "a+b+c"),
        ("'hello'.slice(1, -1)", "ell"),
        ("'hello'.slice(-3)", "llo"),
        ("'hello'.substring(3, 1)", "el"),
        ("'hello'.indexOf('l')", 2),
        ("'hello'.indexOf('z')", -1),
        ("'7'.padStart(3, '0') + '7'.padEnd(3, '.')", "0077.."),
        ("'ab'.repeat(3)", "ababab"),
        ("'hello'.charAt(1)", "e"),
        ("'a'.concat('b', 1, null)", "ab1null"),
        ("'hello'.length", 5),
        ("'hello'[0]", "h"),
        ("$json.name.toString()", "Ann"),
    ],
)
def test_string_methods(source, expected):
    assert ev("={{ " + source + " }}") == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("[1, 2, 3].length", 3),
        ("[1, null, 'a'].join('-')", "1--a"),
        ("[1, 2].join()", "1,2"),
        ("[1, 2].includes(2)", True),
        ("['a', 'b'].indexOf('b')", 1),
        ("[1, 2, 3, 4].slice(1, 3)", [2, 3]),
        ("[1].concat([2, 3], 4)", [1, 2, 3, 4]),
        ("[1, 2, 3].first() + [1, 2, 3].last()", 4),
        ("[1, 2, 3].reverse()", [3, 2, 1]),
        ("$json.tags.join(', ')", "x, y"),
    ],
)
def test_array_methods(source, expected):
    assert ev("={{ " + source + " }}") == expected


def test_reverse_does_not_change_the_data():
    data = make_data()
    assert evaluate("={{ $json.tags.reverse() }}", data) == ["y", "x"]
    assert data.json["tags"] == ["x", "y"]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("$json.price.toFixed(2)", "2.50"),
        ("(2.5).toFixed(0)", "3"),
        ("(1.005).toFixed(2)", "1.00"),
        ("(255).toString()", "255"),
        ("(255).toString(16)", "ff"),
        ("String(12) + String(null) + String([1, 2])", "12null1,2"),
        ("Number('42') + Number('')", 42),
        ("Boolean('') || Boolean('x')", True),
        ("parseInt('42px') + parseInt('0x10')", 58),
        ("parseFloat('3.5e2 apples')", 350),
        ("JSON.stringify({a: [1, 'x'], b: null})", '{"a":[1,"x"],"b":null}'),
        ("JSON.parse('{\"k\": [1, 2]}').k[1]", 2),
        ("Math.round(2.5) + Math.floor(2.7) + Math.ceil(2.1)", 8),
        ("Math.abs(-3) + Math.min(4, 2, 8) + Math.max(1, 5)", 10),
        ("Math.pow(2, 8) + Math.sqrt(16)", 260),
        ("Object.keys({a: 1, b: 2})", ["a", "b"]),
        ("Object.values($json.a.b)", [7]),
    ],
)
def test_number_methods_and_globals(source, expected):
    assert ev("={{ " + source + " }}") == expected


def test_json_parse_of_bad_text_is_an_expression_error():
    raises("={{ JSON.parse('{oops') }}", "JSON.parse failed")


@pytest.mark.parametrize(
    ("source", "match"),
    [
        ("eval('1')", 'unsupported function "eval"'),
        ("$json.name.toUpperCas()", 'unsupported method "toUpperCas" on a string'),
        ("[1, 2].map(x)", 'unsupported method "map" on an array'),
        ("foo", 'unknown variable "foo"'),
        ("$json.n = 1", "assignment not supported"),
        ("x => x", "arrow functions not supported"),
        ("new Date()", '"new" is not supported'),
        ("1 +", "unexpected end of expression"),
        ("1 2", 'unexpected "2"'),
        ("'abc", "unterminated string literal"),
        ("1 # 2", 'unexpected character "#"'),
        ("-2 ** 2", "parentheses"),
        ("$('Chat Trigger')", "is not a value"),
    ],
)
def test_unsupported_constructs_are_clear_errors(source, match):
    error = raises("={{ " + source + " }}", match)
    assert error.expression == "={{ " + source + " }}"


# -- resolve --------------------------------------------------------------------------------------


def test_resolve_evaluates_nested_parameters_into_a_new_structure():
    params = {
        "text": "={{ $json.name }}",
        "options": {"systemMessage": "=You help {{ $json.name }}", "n": 5},
        "list": ["={{ $json.n }}", "plain"],
    }
    result = resolve(params, make_data())
    assert result == {
        "text": "Ann",
        "options": {"systemMessage": "You help Ann", "n": 5},
        "list": [3, "plain"],
    }
    assert params["text"] == "={{ $json.name }}"


def test_resolve_errors_name_the_parameter_path():
    with pytest.raises(ExpressionError) as info:
        resolve({"options": {"systemMessage": "={{ nope }}"}}, make_data())
    assert info.value.parameter == "options.systemMessage"
    assert info.value.expression == "={{ nope }}"


# -- safety ---------------------------------------------------------------------------------------


MAX_REFUSAL_BYTES = 16 * 1024 * 1024  # a refusal builds nothing past the engine's own limits


def fails_fast(source: str, match: str | None = None) -> ExpressionError:
    """Evaluating `source` fails with `match`, having built nothing large first (its work is
    counted in bytes allocated, tests/engine/work.py, not timed)."""
    error, work = measured(lambda: evaluate(source, make_data()))
    assert isinstance(error, ExpressionError), repr(error)
    if match is not None:
        assert re.search(match, str(error)), str(error)
    assert work.peak_bytes < MAX_REFUSAL_BYTES, work.peak_bytes
    return error


@pytest.mark.parametrize(
    ("source", "match"),
    [
        ("={{ __import__('os') }}", 'unsupported function "__import__"'),
        ("={{ __import__('os').system('id') }}", 'unsupported function "__import__"'),
        ("={{ $json.__class__ }}", 'access to "__class__" is not allowed'),
        ("={{ $json['__class__'] }}", 'access to "__class__" is not allowed'),
        ("={{ $json.a.__dict__ }}", 'access to "__dict__" is not allowed'),
        ("={{ ''.constructor.constructor('x') }}", 'access to "constructor" is not allowed'),
        ("={{ $json.__proto__ }}", 'access to "__proto__" is not allowed'),
        ("={{ $json.name.__len__() }}", 'unsupported method "__len__"'),
        ("={{ ''['__class__'] }}", "not allowed"),
        ("={{ $json.tags.__getitem__(0) }}", 'unsupported method "__getitem__"'),
        ("={{ Math.__dict__ }}", "not allowed"),
        ("={{ globals() }}", 'unsupported function "globals"'),
        ("={{ open('/etc/passwd') }}", 'unsupported function "open"'),
        ("={{ this.constructor }}", '"this" is not supported'),
    ],
)
def test_injection_attempts_fail_cleanly(source, match):
    fails_fast(source, match)


def test_huge_exponent_fails_fast():
    fails_fast("={{ 9**9**9**9 }}", "too large")
    fails_fast("={{ Math.pow(10, 400) }}", "too large")


def test_huge_strings_and_lists_fail_fast():
    fails_fast("={{ 'a'.repeat(1e9) }}", "string too long")
    fails_fast("={{ 'a'.padStart(1e9) }}", "string too long")
    fails_fast("={{ 'a'.repeat(900000) + 'b'.repeat(900000) }}", "string too long")
    fails_fast("={{ 'x'.repeat(999999).split('').join('ab') }}")


def test_exact_integer_powers_stay_small():
    assert ev("={{ 2 ** 62 }}") == 2.0**62
    assert ev("={{ 3 ** 4 }}") == 81


def test_deep_nesting_fails_fast_without_recursion_error():
    fails_fast("={{ " + "(" * 10_000 + "1" + ")" * 10_000 + " }}")  # too long as well
    fails_fast("={{ " + "(" * 4_000 + "1" + ")" * 4_000 + " }}", "nested too deeply")
    fails_fast("={{ " + "[" * 4_000 + "]" * 4_000 + " }}", "nested too deeply")
    fails_fast("={{ " + "!" * 9_000 + "1 }}", "nested too deeply")
    fails_fast("={{ " + "`${" * 1_500 + "1" + "}`" * 1_500 + " }}", "nested too deeply")


def test_long_sums_evaluate_without_recursion():
    assert ev("={{ 1" + " + 1" * 2_000 + " }}") == 2_001
    assert ev("={{ ''" + " + 'ab'" * 1_000 + " }}") == "ab" * 1_000


def test_long_member_chains_fail_fast_without_recursion_error():
    fails_fast("={{ $json" + "?.a" * 3_000 + " }}", "nested too deeply")


def test_very_long_expression_is_rejected():
    fails_fast("={{ '" + "a" * 20_000 + "' }}", "too long")


def test_step_budget_stops_expensive_expressions():
    many = ", ".join(["'x'.repeat(500000).length"] * 100)
    fails_fast("={{ [" + many + "] }}", "step limit")


def test_template_output_is_bounded():
    segment = "{{ 'a'.repeat(600000) }}"
    fails_fast("=" + segment + segment, "string too long")


def test_unexpected_python_errors_become_expression_errors():
    def broken(name: str):
        raise KeyError(name)

    data = make_data()
    data.node_items = broken
    with pytest.raises(ExpressionError, match="KeyError"):
        evaluate("={{ $('Chat Trigger').item }}", data)
