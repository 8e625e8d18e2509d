"""The conditions engine (engine/conditions.py) where the differential cases do not reach: a
regex that would backtrack for ages, one that is not a regex, the JavaScript corners of
null and undefined, and the error an item of the wrong type gives."""

from __future__ import annotations

import pytest

from engine.conditions import ConditionError, FilterOptions, condition_passes, regex_test
from engine.executor import run_workflow
from engine.expression_values import UNDEFINED
from engine.workflow import load_workflow

STRICT = FilterOptions()


def _passes(left, operation, right=None, kind="number", options=STRICT) -> bool:
    condition = {
        "leftValue": left,
        "rightValue": right,
        "operator": {"type": kind, "operation": operation},
    }
    return condition_passes(condition, options, 0, 0)


def test_a_regex_that_backtracks_without_end_is_stopped_with_n8n_s_error():
    with pytest.raises(ConditionError, match="Regular expression execution timed out"):
        regex_test(r"(a|aa)+$", "a" * 40 + "!")


def test_a_pattern_that_is_no_regex_fails_naming_it():
    with pytest.raises(ConditionError, match=r"Invalid regular expression: /\(unclosed/"):
        regex_test("/(unclosed/i", "text")


def test_a_regex_literal_s_flags_apply_and_named_groups_are_javascript_s():
    assert regex_test("/^hello/i", "HELLO world")
    assert not regex_test("/^hello/", "HELLO world")
    assert regex_test(r"(?<year>\d{4})-\d{2}", "on 2024-06")


def test_null_compares_as_zero_and_undefined_as_nothing_as_in_javascript():
    assert _passes(None, "lt", 5)  # null < 5: 0 < 5
    assert not _passes(UNDEFINED, "lt", 5)  # undefined < 5: NaN
    assert not _passes(None, "exists") and not _passes(UNDEFINED, "exists")
    assert _passes(UNDEFINED, "notExists")


def test_loose_validation_reads_text_as_numbers_and_booleans_where_it_can():
    loose = FilterOptions(strict=False, version=2)
    assert _passes("42", "gt", 41, options=loose)
    assert _passes("true", "true", kind="boolean", options=loose)
    assert not _passes("false", "true", kind="boolean", options=loose)
    assert _passes("yes", "true", kind="boolean", options=loose)  # not a boolean: truthy


def test_an_item_of_the_wrong_type_fails_the_node_naming_item_and_hint():
    workflow = {
        "nodes": [
            {
                "id": "t",
                "name": "Start",
                "type": "n8n-nodes-base.manualTrigger",
                "typeVersion": 1,
                "position": [0, 0],
                "parameters": {},
            },
            {
                "id": "i",
                "name": "If",
                "type": "n8n-nodes-base.if",
                "typeVersion": 2.2,
                "position": [200, 0],
                "parameters": {
                    "conditions": {
                        "conditions": [
                            {
                                "leftValue": "={{ $json.n }}",
                                "rightValue": 1,
                                "operator": {"type": "number", "operation": "gt"},
                            }
                        ],
                        "combinator": "and",
                        "options": {
                            "caseSensitive": True,
                            "typeValidation": "strict",
                            "version": 2,
                        },
                    }
                },
            },
        ],
        "connections": {"Start": {"main": [[{"node": "If", "type": "main", "index": 0}]]}},
    }
    run = run_workflow(load_workflow(workflow), [{"json": {"n": 2}}, {"json": {"n": "2"}}])
    assert (run.status, run.error_node) == ("error", "If")
    assert run.error == (
        "Wrong type: '2' is a string but was expecting a number [condition 0, item 1]. "
        "Try enabling 'Convert types where required' in the node's settings."
    )
    assert run.run_data["If"][0]["error"]["node"] == "If"
