"""JSON.parse in expressions fails as JavaScript does, in its words: each expected message below is
what Node.js 24 (n8n 2.41.1's runtime) printed for `JSON.parse(text)`."""

from __future__ import annotations

import pytest

from engine.errors import ExpressionError
from engine.expressions import ExpressionData, evaluate


def parse_error(text: str) -> str:
    data = ExpressionData(json={"text": text})
    with pytest.raises(ExpressionError) as info:
        evaluate("={{ JSON.parse($json.text) }}", data)
    return info.value.message


@pytest.mark.parametrize(
    "text, v8",
    [
        ("", "SyntaxError: Unexpected end of JSON input"),
        ("{", "SyntaxError: Expected property name or '}' in JSON at position 1 (line 1 column 2)"),
        ("x", "SyntaxError: Unexpected token 'x', \"x\" is not valid JSON"),
        ("[1,]", "SyntaxError: Unexpected token ']', \"[1,]\" is not valid JSON"),
        (
            "[1 2]",
            "SyntaxError: Expected ',' or ']' after array element in JSON at position 3 (line 1 column 4)",
        ),
        ('"abc', "SyntaxError: Unterminated string in JSON at position 4 (line 1 column 5)"),
        (
            '{"a":1}x',
            "SyntaxError: Unexpected non-whitespace character after JSON at position 7 (line 1 column 8)",
        ),
        (
            '"a\tb"',
            "SyntaxError: Bad control character in string literal in JSON at position 2 (line 1 column 3)",
        ),
        ("nul", "SyntaxError: Unexpected end of JSON input"),
        ("nulx", "SyntaxError: Unexpected token 'x', \"nulx\" is not valid JSON"),
        (
            '{"a" 1}',
            "SyntaxError: Expected ':' after property name in JSON at position 5 (line 1 column 6)",
        ),
        ("[-]", "SyntaxError: No number after minus sign in JSON at position 2 (line 1 column 3)"),
        ("01", "SyntaxError: Unexpected number in JSON at position 1 (line 1 column 2)"),
        (
            "1.",
            "SyntaxError: Unterminated fractional number in JSON at position 2 (line 1 column 3)",
        ),
        (
            "1e+",
            "SyntaxError: Exponent part is missing a number in JSON at position 3 (line 1 column 4)",
        ),
        ('"\\x"', "SyntaxError: Bad escaped character in JSON at position 2 (line 1 column 3)"),
        ('"\\u12"', "SyntaxError: Bad Unicode escape in JSON at position 5 (line 1 column 6)"),
        ('"\\', "SyntaxError: Unexpected end of JSON input"),
        (
            '{"a":1,}',
            "SyntaxError: Expected double-quoted property name in JSON at position 7 (line 1 column 8)",
        ),
        (
            "{,}",
            "SyntaxError: Expected property name or '}' in JSON at position 1 (line 1 column 2)",
        ),
        (
            "[1,\n2,\n3 4]",
            "SyntaxError: Expected ',' or ']' after array element in JSON at position 9 (line 3 column 3)",
        ),
        (
            '{"a": [1, {"b": 2} 3]}',
            "SyntaxError: Expected ',' or ']' after array element in JSON at position 19 (line 1 column 20)",
        ),
        (
            '{"a": {"b": [1]} "c"}',
            "SyntaxError: Expected ',' or '}' after property value in JSON at position 17 (line 1 column 18)",
        ),
        (
            '["x\\"]" 1]',
            "SyntaxError: Expected ',' or ']' after array element in JSON at position 8 (line 1 column 9)",
        ),
        (
            "[1,2,3,4,5,6,7,8,9,10,11,x,12,13,14,15,16,17]",
            "SyntaxError: Unexpected token 'x', ...\"8,9,10,11,x,12,13,14\"... is not valid JSON",
        ),
        (
            "[1,2,3,4,5,6,7,8,9,x]",
            "SyntaxError: Unexpected token 'x', ...\"5,6,7,8,9,x]\" is not valid JSON",
        ),
        (
            "x12345678901234567890123",
            "SyntaxError: Unexpected token 'x', \"x123456789\"... is not valid JSON",
        ),
        ("NaN", 'SyntaxError: "NaN" is not valid JSON'),
        ("[NaN]", "SyntaxError: Unexpected token 'N', \"[NaN]\" is not valid JSON"),
        (
            "[1, -Infinity]",
            "SyntaxError: No number after minus sign in JSON at position 5 (line 1 column 6)",
        ),
        ('["NaN", NaN]', 'SyntaxError: Unexpected token \'N\', "["NaN", NaN]" is not valid JSON'),
        ("undefined", 'SyntaxError: "undefined" is not valid JSON'),
    ],
)
def test_bad_json_is_told_in_v8s_words(text, v8):
    assert parse_error(text) == f"JSON.parse failed: {v8}"


def test_json_nested_past_what_the_parser_holds_is_javascripts_stack_error():
    deep = "[" * 100_000 + "]" * 100_000
    assert parse_error(deep) == "JSON.parse failed: RangeError: Maximum call stack size exceeded"


def test_good_json_reads_as_javascript_reads_it():
    data = ExpressionData(json={"text": '{"big": 12345678901234567890123, "s": "NaN"}'})
    assert evaluate("={{ JSON.parse($json.text) }}", data) == {
        "big": 1.2345678901234568e22,
        "s": "NaN",
    }
