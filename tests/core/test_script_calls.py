"""Each execution script and the class that names its KEYS and ARGV (core/script_call.py) agree:
the script reads them through the class's prologue only, uses every name it is given, and
redefines none of them."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from core import end_script, execution_scripts
from core.end_script import EndCall
from core.execution_scripts import ClaimAtTurnCall, ClaimCall, CreateCall, PauseCall, ReplyCall
from core.script_call import LUA_KEYWORDS, ScriptCall, arg, key, named

SCRIPTS: dict[str, tuple[type[ScriptCall], str]] = {
    "create": (CreateCall, execution_scripts.CREATE),
    "claim": (ClaimCall, execution_scripts.CLAIM),
    "claim at turn": (ClaimAtTurnCall, execution_scripts.CLAIM_AT_TURN),
    "pause": (PauseCall, execution_scripts.PAUSE),
    "reply": (ReplyCall, execution_scripts.REPLY),
    "end": (EndCall, end_script.END),
}
_POSITION = re.compile(r"\b(?:KEYS|ARGV)\[\d+\]")


def names(call: type[ScriptCall]) -> list[str]:
    given = [f.name for f in named(call, "KEYS") + named(call, "ARGV")]
    return given + ([call.TAIL] if call.TAIL else [])


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_script_reads_its_keys_and_args_only_by_the_names_its_class_gives(name):
    call, text = SCRIPTS[name]
    prologue = call.prologue()
    assert text.count(prologue) == 1
    body = text.replace(prologue, "")
    assert _POSITION.findall(body) == []
    assert _POSITION.findall(prologue) == [
        *(f"KEYS[{i}]" for i in range(1, len(named(call, "KEYS")) + 1)),
        *(f"ARGV[{i}]" for i in range(1, len(named(call, "ARGV")) + 1)),
    ]


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_script_uses_every_name_it_is_given_and_redefines_none(name):
    call, text = SCRIPTS[name]
    body = text.replace(call.prologue(), "")
    unused = [n for n in names(call) if not re.search(rf"\b{n}\b", body)]
    assert unused == []
    redefined = [
        n for n in names(call) if re.search(rf"\blocal\s+(?:function\s+)?{n}\b|\b{n}\s*=[^=]", body)
    ]
    assert redefined == []
    assert [n for n in names(call) if n in LUA_KEYWORDS] == []


def test_every_script_of_the_store_is_held_to_its_class():
    """The scripts the store runs, and the pieces they are made of: only a prologue counts
    positions (the helpers index ARGV and KEYS from where they are told)."""
    modules = (execution_scripts, end_script)
    scripts = {
        value
        for module in modules
        for name, value in vars(module).items()
        if name.isupper() and not name.startswith(("_", "LUA_")) and "redis.call(" in value
    }
    assert scripts == {text for _, text in SCRIPTS.values()}
    pieces = [v for m in modules for v in vars(m).values() if isinstance(v, str)]
    prologues = {call.prologue() for call, _ in SCRIPTS.values()}
    assert [p for p in pieces if _POSITION.search(p) and p not in scripts | prologues] == []


@dataclass(slots=True, kw_only=True)
class _Call(ScriptCall):
    TAIL = "rest_at"
    first: str = key()
    second: str | None = key(optional=True)
    third: str | None = key(optional=True)
    value: int = arg()
    rest: tuple[str, ...] = ()

    def tail(self) -> tuple[str, ...]:
        return self.rest


def test_a_call_lists_its_keys_and_args_in_order_and_may_leave_out_its_last_keys():
    call = _Call(first="a", second="b", value=1, rest=("x", "y"))
    assert (call.keys(), call.args()) == (["a", "b"], [1, "x", "y"])
    assert _Call.prologue().splitlines() == [
        "local first = KEYS[1]",
        "local second = KEYS[2]",
        "local third = KEYS[3]",
        "local value = ARGV[1]",
        "local rest_at = 2",
    ]
    with pytest.raises(ValueError, match="only its last KEYS"):
        _Call(first="a", third="c", value=1).keys()


def test_an_optional_arg_is_left_out_when_none():
    @dataclass(slots=True, kw_only=True)
    class Route(ScriptCall):
        one: str = arg()
        two: str | None = arg(optional=True)

    assert Route(one="1").args() == ["1"]
    assert Route(one="1", two="2").args() == ["1", "2"]
