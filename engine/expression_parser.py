"""Tokenizer and parser for n8n expressions: the text after a parameter's leading `=`.

A template is literal text with `{{ expr }}` segments. `parse_template` turns it into a tuple of
parts, each ("text", str) or ("expr", node), where a node is a plain tuple whose first element
names its kind (see `_Parser`). Nothing here evaluates anything; expressions.py walks the tree.

Bounds: the caller limits the text length; nesting (parentheses, unary operators, literals,
template literals) is limited to MAX_NESTING so hostile input fails fast with ExpressionError
instead of RecursionError.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from engine.errors import ExpressionError
from engine.expression_values import MAX_EXACT_INT, normalize

MAX_NESTING = 100  # far beyond any hand-written expression, far below Python's recursion limit

_PUNCTUATORS = (
    "===", "!==", "...", "**", "?.", "??", "||", "&&", "==", "!=", "<=", ">=", "=>",
    "+", "-", "*", "/", "%", "<", ">", "!", "?", ":", ".", ",", "(", ")", "[", "]", "{", "}",
    "=", "&", "|", ";", "^", "~",
)  # fmt: skip
_PUNCTUATORS_BY_CHAR: dict[str, list[str]] = {}
for _p in _PUNCTUATORS:  # longest first, as listed
    _PUNCTUATORS_BY_CHAR.setdefault(_p[0], []).append(_p)
_OPENERS = {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "0": "\0"}
_BINARY = {  # operator -> binding power; higher binds tighter (JS precedence order)
    "??": 1, "||": 2, "&&": 3, "===": 4, "!==": 4, "==": 4, "!=": 4,
    "<": 5, "<=": 5, ">": 5, ">=": 5, "+": 6, "-": 6, "*": 7, "/": 7, "%": 7, "**": 8,
}  # fmt: skip
_LOGICAL = {"??", "||", "&&"}
_DIGITS = frozenset("0123456789")  # ASCII only: str.isdigit also accepts "²" and "١"
# A numeric literal; possessive runs that cannot overlap, so matching is linear in its length.
_NUMBER = re.compile(
    r"0[xX][0-9a-fA-F]*+|(?:[0-9]++(?:\.[0-9]*+)?+|\.[0-9]++)(?:[eE][+-]?+[0-9]++)?+"
)
# An escaped UTF-16 pair such as '\ud83d\ude00': JS reads it as one character (an emoji).
_SURROGATE_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")
_LITERAL_NAMES = {"true": True, "false": False, "null": None}
_UNSUPPORTED_WORDS = {"new", "function", "class", "delete", "await", "yield", "this", "import"}

# (kind, value, position); kinds: num str tmpl name op end. The value's type follows the kind
# (int | float, str, template parts, str, str, None), so it is Any and each use reads its kind.
Token = tuple[str, Any, int]


# -- tokenizer ------------------------------------------------------------------------------------


def _lex(src: str, pos: int, stop: str | None, nesting: int) -> tuple[list[Token], int]:
    """Tokenize from `pos` until the end (stop=None), or until an unmatched `}` (stop="}") or
    `}}` (stop="}}"). Returns the tokens and the position just after the stop marker."""
    if nesting > MAX_NESTING:
        raise ExpressionError("expression is nested too deeply")
    tokens: list[Token] = []
    braces = 0  # open `{`: a `}` closes one of them before it can end the segment
    opened = 0  # open brackets of any kind: deep nesting fails here, before parsing
    while True:
        pos = _skip_blank(src, pos)
        if pos >= len(src):
            if stop is not None:
                raise ExpressionError(f'missing closing "{stop}"')
            tokens.append(("end", None, pos))
            return tokens, pos
        if braces == 0 and stop is not None and src.startswith(stop, pos):
            tokens.append(("end", None, pos))
            return tokens, pos + len(stop)
        token, pos = _lex_token(src, pos, nesting)
        if token[0] == "op":
            braces += {"{": 1, "}": -1}.get(token[1], 0)
            opened += _OPENERS.get(token[1], 0)
            if nesting + opened > MAX_NESTING:
                raise ExpressionError("expression is nested too deeply")
        tokens.append(token)


def _skip_blank(src: str, pos: int) -> int:
    """The position after whitespace and `/* ... */` comments, as JS skips them: n8n's editor
    writes `{{ /*n8n-auto-generated-fromAI-override*/ $fromAI(...) }}`."""
    while True:
        while pos < len(src) and src[pos].isspace():
            pos += 1
        if not src.startswith("/*", pos):
            return pos
        end = src.find("*/", pos + 2)
        if end < 0:
            raise ExpressionError(f"unterminated comment at position {pos}")
        pos = end + 2


def _lex_token(src: str, pos: int, nesting: int) -> tuple[Token, int]:
    """The token starting at `pos` (not whitespace) and the position after it."""
    ch, n = src[pos], len(src)
    if ch in _DIGITS or (ch == "." and pos + 1 < n and src[pos + 1] in _DIGITS):
        number, end = _lex_number(src, pos)
        return ("num", number, pos), end
    if ch in "'\"":
        text, end = _lex_string(src, pos)
        return ("str", text, pos), end
    if ch == "`":
        parts, end = _lex_template_literal(src, pos, nesting)
        return ("tmpl", parts, pos), end
    if ch.isalpha() or ch in "_$":
        end = pos + 1
        while end < n and (src[end].isalnum() or src[end] in "_$"):
            end += 1
        return ("name", src[pos:end], pos), end
    op = next((p for p in _PUNCTUATORS_BY_CHAR.get(ch, ()) if src.startswith(p, pos)), None)
    if op is None:
        raise ExpressionError(f'unexpected character "{ch}" at position {pos}')
    if op == "?." and pos + 2 < n and src[pos + 2] in _DIGITS:
        op = "?"  # `a?.5:1` is a ternary, as in JS
    return ("op", op, pos), pos + len(op)


def _lex_number(src: str, pos: int) -> tuple[int | float, int]:
    match = _NUMBER.match(src, pos)
    if match is None:  # unreachable: _lex_token saw a digit, or "." and a digit, at pos
        raise ExpressionError(f"invalid number at position {pos}")
    text, end = match.group(), match.end()
    if text in ("0x", "0X") or (end < len(src) and (src[end].isalpha() or src[end] in "_$")):
        shown = text + src[end : end + 1]
        raise ExpressionError(f'invalid number "{shown}" at position {pos}')
    if text[:2] in ("0x", "0X"):
        return normalize(int(text[2:], 16)), end  # base 16 converts in linear time
    # float(), not int(): it is linear in the digits (int() refuses more than 4300) and rounds
    # a literal past the double range to Infinity, as JS does.
    value = float(text)  # `5.` and `1e3` are whole numbers: keep them ints like integer literals
    return (int(value) if value.is_integer() and abs(value) <= MAX_EXACT_INT else value), end


def _lex_string(src: str, pos: int) -> tuple[str, int]:
    quote, pos = src[pos], pos + 1
    out: list[str] = []
    while pos < len(src):
        ch = src[pos]
        if ch == quote:
            return _join_surrogate_pairs("".join(out)), pos + 1
        if ch == "\n":
            break
        if ch == "\\":
            text, pos = _lex_escape(src, pos)
            out.append(text)
        else:
            out.append(ch)
            pos += 1
    raise ExpressionError("unterminated string literal")


def _lex_escape(src: str, pos: int) -> tuple[str, int]:
    """Decode the escape sequence starting at the backslash at `pos`."""
    if pos + 1 >= len(src):
        raise ExpressionError("unterminated string literal")
    ch = src[pos + 1]
    if ch in "xu":
        width = 2 if ch == "x" else 4
        digits = src[pos + 2 : pos + 2 + width]
        if len(digits) != width or any(c not in "0123456789abcdefABCDEF" for c in digits):
            raise ExpressionError(f"invalid \\{ch} escape in string literal")
        return chr(int(digits, 16)), pos + 2 + width
    if ch == "\n":
        return "", pos + 2  # line continuation
    return _ESCAPES.get(ch, ch), pos + 2


def _join_surrogate_pairs(text: str) -> str:
    """Turn each escaped UTF-16 pair into the one character JS sees. Left as two halves, the
    string could not be encoded as UTF-8 when the result is stored or sent. A lone half stays."""
    return _SURROGATE_PAIR.sub(_decode_pair, text)


def _decode_pair(match: re.Match[str]) -> str:
    return match.group().encode("utf-16-le", "surrogatepass").decode("utf-16-le")


def _lex_template_literal(src: str, pos: int, nesting: int) -> tuple[tuple, int]:
    """A backtick string; `${ expr }` parts are tokenized recursively."""
    parts: list[str | list[Token]] = []
    out: list[str] = []
    pos += 1
    while pos < len(src):
        ch = src[pos]
        if ch == "`":
            parts.append(_join_surrogate_pairs("".join(out)))
            return tuple(parts), pos + 1
        if ch == "\\":
            text, pos = _lex_escape(src, pos)
            out.append(text)
        elif src.startswith("${", pos):
            parts.append(_join_surrogate_pairs("".join(out)))
            out = []
            tokens, pos = _lex(src, pos + 2, "}", nesting + 1)
            parts.append(tokens)
        else:
            out.append(ch)
            pos += 1
    raise ExpressionError("unterminated template literal")


# -- parser ---------------------------------------------------------------------------------------


class _Parser:
    """Pratt parser. Node kinds:
    ("lit", value)  ("undef",)  ("name", str)  ("tmpl", (node | str, ...))
    ("array", (node, ...))  ("object", ((key, node), ...))
    ("member", obj, key_node, optional)  ("call", callee, (args...), optional)
    ("chain", node) -- an optional chain: `?.` on a nullish value ends it with undefined
    ("unary", op, node)  ("binary", op, left, right)  ("logical", op, left, right)
    ("cond", test, then, otherwise)
    """

    def __init__(self, tokens: list[Token], nesting: int = 0):
        self.tokens = tokens
        self.i = 0
        self.nesting = nesting

    def parse(self) -> tuple:
        if self.peek()[0] == "end":
            return ("undef",)
        node = self.expression()
        kind, value, pos = self.peek()
        if kind != "end":
            raise ExpressionError(f'unexpected "{value}" at position {pos}')
        return node

    def peek(self) -> Token:
        return self.tokens[self.i]

    def next(self) -> Token:
        tok = self.tokens[self.i]
        if tok[0] != "end":
            self.i += 1
        return tok

    def at(self, op: str) -> bool:
        kind, value, _ = self.tokens[self.i]
        return kind == "op" and value == op

    def expect(self, op: str) -> None:
        kind, value, pos = self.next()
        if kind != "op" or value != op:
            found = "end of expression" if kind == "end" else f'"{value}"'
            raise ExpressionError(f'expected "{op}" but found {found} at position {pos}')

    def enter(self) -> None:
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            raise ExpressionError("expression is nested too deeply")

    def expression(self) -> tuple:
        """Conditional expression: the lowest precedence we support (no assignment, no comma)."""
        self.enter()
        test = self.binary(0)
        if self.at("?"):
            self.next()
            then = self.expression()
            self.expect(":")
            test = ("cond", test, then, self.expression())
        elif self.at("=") or self.at("=>"):
            what = "assignment" if self.at("=") else "arrow functions"
            raise ExpressionError(f"{what} not supported in expressions")
        self.nesting -= 1
        return test

    def binary(self, min_power: int) -> tuple:
        left = self.unary()
        while True:
            kind, op, _ = self.peek()
            power = _BINARY.get(op) if kind == "op" else None
            if power is None or power <= min_power:
                return left
            self.next()
            self.enter()  # `1 ** 1 ** ...` recurses once per operator: count it as nesting
            right = self.binary(power - 1 if op == "**" else power)  # ** is right-associative
            self.nesting -= 1
            left = ("logical" if op in _LOGICAL else "binary", op, left, right)

    def unary(self) -> tuple:
        kind, value, _ = self.peek()
        if (kind == "op" and value in ("!", "-", "+")) or (kind == "name" and value == "typeof"):
            self.next()
            self.enter()
            node = ("unary", value, self.unary())
            self.nesting -= 1
            if self.at("**"):  # JS rejects `-2 ** 2` as ambiguous; so do we
                raise ExpressionError(
                    "put parentheses around a unary operand of **, e.g. (-2) ** 2"
                )
            return node
        return self.postfix(self.primary())

    def postfix(self, node: tuple) -> tuple:
        optional_chain = False
        while True:
            kind, value, pos = self.peek()
            if kind != "op" or value not in (".", "?.", "[", "("):
                return ("chain", node) if optional_chain else node
            self.next()
            optional = value == "?."
            optional_chain = optional_chain or optional
            if optional and (self.at("(") or self.at("[")):
                value = self.next()[1]
            if value == "(":
                node = ("call", node, self.arguments(), optional)
            elif value == "[":
                self.enter()
                key = self.expression()
                self.nesting -= 1
                self.expect("]")
                node = ("member", node, key, optional)
            else:
                name_kind, name, name_pos = self.next()
                if name_kind != "name":
                    raise ExpressionError(f"expected a property name at position {name_pos}")
                node = ("member", node, ("lit", name), optional)

    def arguments(self) -> tuple:
        return tuple(self.sequence(")"))

    def sequence(self, close: str) -> list[tuple]:
        self.enter()
        items = []
        while not self.at(close):
            if self.at("..."):
                raise ExpressionError("spread syntax (...) is not supported")
            items.append(self.expression())
            if not self.at(close):
                self.expect(",")
        self.next()
        self.nesting -= 1
        return items

    def primary(self) -> tuple:
        kind, value, pos = self.next()
        if kind in ("num", "str"):
            return ("lit", value)
        if kind == "tmpl":
            return self.template_literal(value)
        if kind == "name":
            return self.name(value)
        if kind == "op" and value == "(":
            self.enter()
            node = self.expression()
            self.nesting -= 1
            self.expect(")")
            if self.at("=>"):
                raise ExpressionError("arrow functions not supported in expressions")
            return node
        if kind == "op" and value == "[":
            return ("array", tuple(self.sequence("]")))
        if kind == "op" and value == "{":
            return self.object_literal()
        if kind == "end":
            raise ExpressionError("unexpected end of expression")
        raise ExpressionError(f'unexpected "{value}" at position {pos}')

    def name(self, value: str) -> tuple:
        if value in _LITERAL_NAMES:
            return ("lit", _LITERAL_NAMES[value])
        if value == "undefined":
            return ("undef",)
        if value in ("NaN", "Infinity"):
            return ("lit", float("nan") if value == "NaN" else float("inf"))
        if value in _UNSUPPORTED_WORDS:
            raise ExpressionError(f'"{value}" is not supported in expressions')
        if self.at("=>"):
            raise ExpressionError("arrow functions not supported in expressions")
        return ("name", value)

    def object_literal(self) -> tuple:
        self.enter()
        props = []
        while not self.at("}"):
            kind, key, pos = self.next()
            if kind not in ("name", "str", "num"):
                raise ExpressionError(f"expected a property name at position {pos}")
            self.expect(":")
            props.append((key if kind != "num" else str(key), self.expression()))
            if not self.at("}"):
                self.expect(",")
        self.next()
        self.nesting -= 1
        return ("object", tuple(props))

    def template_literal(self, parts: tuple) -> tuple:
        out: list[str | tuple] = []
        for part in parts:
            if isinstance(part, str):
                out.append(part)
            else:
                out.append(_Parser(part, self.nesting + 1).parse())
        return ("tmpl", tuple(out))


# -- templates ------------------------------------------------------------------------------------


@lru_cache(maxsize=1024)
def parse_template(text: str) -> tuple[tuple[str, object], ...]:
    """Split `text` into ("text", str) and ("expr", node) parts. Cached: the engine evaluates the
    same parameter once per item."""
    parts: list[tuple[str, object]] = []
    pos = 0
    while True:
        start = text.find("{{", pos)
        if start < 0:
            break
        if start > pos:
            parts.append(("text", text[pos:start]))
        tokens, pos = _lex(text, start + 2, "}}", 0)
        parts.append(("expr", _Parser(tokens).parse()))
    if pos < len(text):
        parts.append(("text", text[pos:]))
    return tuple(parts)
