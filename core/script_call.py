"""A Lua script's KEYS and ARGV by name: one dataclass per script (keyword-only fields), whose
fields are its keys (`key()`) and its arguments (`arg()`), each list in the fields' order. The script reads them
through the prologue the same class writes (`local record_key = KEYS[1]` ...), so neither the
Python side nor the Lua side counts positions, and the two cannot drift apart.

Keys may be left out (None) only at the end: a script on one Redis takes the indexes, while in
a cluster they are other slots' and the script sees fewer keys (`if running_index then`). A
script whose ARGV goes on past its named arguments (a variable number of values: memory turns,
a line's key halves) names the index where that tail begins (`TAIL`) and adds the tail's values
itself (`tail`); tests/core/test_script_calls.py holds each script to its class.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import Field, dataclass, field, fields
from typing import Any, ClassVar

LUA_KEYWORDS = frozenset(
    [
        "and",
        "break",
        "do",
        "else",
        "elseif",
        "end",
        "false",
        "for",
        "function",
        "if",
        "in",
        "local",
        "nil",
        "not",
        "or",
        "repeat",
        "return",
        "then",
        "true",
        "until",
        "while",
    ]
)


def key(*, optional: bool = False) -> Any:
    """A field that is one of the script's KEYS; an `optional` one may be None (left out, as
    every key after it)."""
    if optional:
        return field(default=None, metadata={"lua": "KEYS"})
    return field(metadata={"lua": "KEYS"})


def arg(*, optional: bool = False) -> Any:
    """A field that is one of the script's ARGV; an `optional` one may be None (left out, as
    every argument after it; never with a tail)."""
    if optional:
        return field(default=None, metadata={"lua": "ARGV"})
    return field(metadata={"lua": "ARGV"})


@dataclass(slots=True, kw_only=True)
class ScriptCall:
    # The name the prologue gives the index at which the ARGV tail begins ('' = no tail).
    TAIL: ClassVar[str] = ""

    def keys(self) -> list[str]:
        return _given(self, "KEYS")

    def args(self) -> list[Any]:
        return _given(self, "ARGV") + list(self.tail())

    def tail(self) -> Sequence[Any]:
        """The ARGV values after the named ones (TAIL says where they begin)."""
        return ()

    @classmethod
    def prologue(cls) -> str:
        """The Lua lines that name the script's KEYS and ARGV (and where the tail begins)."""
        lines = [f"local {f.name} = KEYS[{i}]" for i, f in enumerate(named(cls, "KEYS"), 1)]
        argv = named(cls, "ARGV")
        lines += [f"local {f.name} = ARGV[{i}]" for i, f in enumerate(argv, 1)]
        if cls.TAIL:
            lines.append(f"local {cls.TAIL} = {len(argv) + 1}")
        return "\n".join(lines) + "\n"


def named(cls: type, kind: str) -> list[Field[Any]]:
    """The fields of `cls` that are its script's `kind` ("KEYS" or "ARGV"), in order."""
    return [f for f in fields(cls) if f.metadata.get("lua") == kind]


def _given(call: ScriptCall, kind: str) -> list[Any]:
    values = _getter(type(call), kind)(call)
    if None not in values:
        return list(values)
    given = list(values[: values.index(None)])
    if len(given) < len(values) - values.count(None):
        raise ValueError(f"{type(call).__name__}: only its last {kind} may be left out")
    return given


_NAMES: dict[tuple[type, str], tuple[str, ...]] = {}
_GETTERS: dict[tuple[type, str], Callable[[Any], tuple[Any, ...]]] = {}


def names_of(cls: type, kind: str) -> tuple[str, ...]:
    """The names of `named`, kept per class: a call's lists are built on every step."""
    found = _NAMES.get((cls, kind))
    if found is None:
        found = _NAMES[cls, kind] = tuple(f.name for f in named(cls, kind))
    return found


def _getter(cls: type, kind: str) -> Callable[[Any], tuple[Any, ...]]:
    """Reads the fields of `names_of` in one call, always as a tuple."""
    getter = _GETTERS.get((cls, kind))
    if getter is None:
        names = names_of(cls, kind)
        read = operator.attrgetter(*names) if names else (lambda call: ())
        getter = read if len(names) != 1 else (lambda call: (read(call),))
        _GETTERS[cls, kind] = getter
    return getter
