"""Matching and merging items, as n8n's Merge node does it (Merge/v3/helpers/utils and the
lodash functions it calls): finding the items of input 2 whose fields equal an item of input 1's
(exactly, or with "fuzzy compare"), and merging their JSON with n8n's clash handling (prefer
input 1, prefer the last input, or suffix every key with its input number; deep or shallow;
optionally keeping non-empty values).

Values are JSON (dict, list, str, int/float, bool, None); a field that is not there is
UNDEFINED, which differs from null here as in JavaScript.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine import expression_values as js
from engine.expression_values import UNDEFINED
from engine.node import Item

Merger = Callable[..., dict]


# --- equality ------------------------------------------------------------------------------------


def same(a: Any, b: Any) -> bool:
    """lodash isEqual on JSON values: deep, type-strict (true is not 1), NaN equals NaN."""
    if js.tag(a) != js.tag(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return bool(a == b)


def _falsy(value: Any) -> bool:
    return value is None or value == "" or (isinstance(value, list) and not value)


def fuzzy_same(a: Any, b: Any) -> bool:
    """n8n's fuzzyCompare (version 1): 3 matches "3", "" matches null and a missing field,
    true matches "true" and 1, an object matches its JSON text."""
    if a is not None and b is not None and js.type_of(a) == js.type_of(b):
        return same(a, b)
    if (_falsy(a) and (_falsy(b) or b is UNDEFINED)) or (a is UNDEFINED and _falsy(b)):
        return True
    for x, y in ((a, b), (b, a)):
        if js.tag(x) == "number" and isinstance(y, str):
            return js.to_string(x) == y
        if isinstance(x, dict | list) and isinstance(y, str):
            try:
                return same(json.loads(y), x)
            except ValueError:
                return False
    for x, y in ((a, b), (b, a)):
        if isinstance(x, bool) and isinstance(y, str) and y.lower() == js.to_string(x):
            return True
        if isinstance(x, bool) and js.tag(y) == "number" and y == int(x):
            return True
        if isinstance(x, bool) and y == ("1" if x else "0"):
            return True
    return same(a, b)


# --- reading fields ------------------------------------------------------------------------------


def field_value(data: dict, path: str, dot_notation: bool = True) -> Any:
    """lodash get(data, path) (`a.b`, `a[0].b`), or data[path] without dot notation."""
    if not dot_notation:
        return data.get(path, UNDEFINED)
    current: Any = data
    for part in path.replace("[", ".").replace("]", "").split("."):
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return UNDEFINED
    return current


# --- merging JSON --------------------------------------------------------------------------------


def deep_merge(*sources: Any, keep_filled: bool = False) -> dict:
    """lodash merge({}, ...sources) (mergeWith and n8n's "minimize empty fields" customizer with
    `keep_filled`): nested objects and arrays merge key by key and index by index."""
    result: dict = {}
    for source in sources:
        if isinstance(source, dict):
            _merge_into(result, source, keep_filled)
    return result


def _merge_into(target: dict | list, source: dict | list, keep_filled: bool) -> None:
    keys = range(len(source)) if isinstance(source, list) else source.keys()
    for key in keys:
        value = source[key]
        current = _get(target, key)
        if isinstance(value, list):
            merged: Any = list(current) if isinstance(current, list) else []
            _merge_into(merged, value, keep_filled)
        elif isinstance(value, dict):
            if isinstance(current, list):
                continue  # lodash sets the keys on the array, which JSON does not show
            merged = dict(current) if isinstance(current, dict) else {}
            _merge_into(merged, value, keep_filled)
        elif keep_filled and (value is None or value == "") and current is not UNDEFINED:
            continue
        else:
            merged = value
        _set(target, key, merged)


def _get(target: dict | list, key: Any) -> Any:
    if isinstance(target, list):
        return target[key] if key < len(target) else UNDEFINED
    return target.get(key, UNDEFINED)


def _set(target: dict | list, key: Any, value: Any) -> None:
    if isinstance(target, dict):
        target[key] = value
        return
    while len(target) <= key:
        target.append(None)
    target[key] = value


def shallow_merge(*sources: Any, keep_filled: bool = False) -> dict:
    """lodash assign({}, ...sources) (assignWith with the "minimize empty fields" customizer)."""
    result: dict = {}
    for source in sources:
        for key, value in (source or {}).items():
            if keep_filled and (value is None or value == "") and key in result:
                continue
            result[key] = value
    return result


def merger(clash: dict) -> Merger:
    """n8n's selectMergeMethod: deep unless `mergeMode` is shallowMerge; `overrideEmpty` keeps
    the values that are not empty."""
    keep_filled = bool(clash.get("overrideEmpty"))
    if clash.get("mergeMode") == "shallowMerge":
        return lambda *sources: shallow_merge(*sources, keep_filled=keep_filled)
    return lambda *sources: deep_merge(*sources, keep_filled=keep_filled)


def suffixed(items: list[Item], suffix: str) -> list[Item]:
    """Every top-level key of each item's JSON gets `_<suffix>` (addSuffixToEntriesKeys)."""
    return [
        {**i, "json": {f"{k}_{suffix}": v for k, v in i.get("json", {}).items()}} for i in items
    ]


def paired(item: Item) -> list:
    """preparePairedItemDataArray: an item's pairedItem as a list."""
    value = item.get("pairedItem", UNDEFINED)
    if value is UNDEFINED:
        return []
    if isinstance(value, int) and not isinstance(value, bool):
        return [{"item": value}]
    return value if isinstance(value, list) else [value]


# --- matching fields -----------------------------------------------------------------------------


@dataclass
class Matches:
    matched: list[tuple[Item, list[Item]]] = field(default_factory=list)
    matched2: list[Item] = field(default_factory=list)
    unmatched1: list[Item] = field(default_factory=list)
    unmatched2: list[Item] = field(default_factory=list)


def find_matches(
    input1: list[Item], input2: list[Item], fields: list[dict], options: dict
) -> Matches:
    """n8n's findMatches: for each item of input 1, the items of input 2 whose fields equal
    its own (all of them, or the first with `multipleMatches` "first")."""
    equal = fuzzy_same if options.get("fuzzyCompare") else same
    dots = not options.get("disableDotNotation")
    first_only = options.get("multipleMatches", "all") == "first"
    one_per_match = options.get("outputDataFrom") == "both" or options.get("joinMode") in (
        "enrichInput1",
        "enrichInput2",
    )
    result, matched_in_2 = Matches(), set[int]()
    for entry in input1:
        lookup = {
            f["field2"]: field_value(entry.get("json", {}), f["field1"], dots) for f in fields
        }
        if any(value is UNDEFINED for value in lookup.values()):
            result.unmatched1.append(entry)
            continue
        found = [
            (index, other)
            for index, other in enumerate(input2)
            if all(equal(v, field_value(other.get("json", {}), k, dots)) for k, v in lookup.items())
        ]
        found = found[:1] if first_only else found
        matched_in_2.update(index for index, _ in found)
        if not found:
            result.unmatched1.append(entry)
        elif one_per_match:
            result.matched += [(entry, [other]) for _, other in found]
        else:
            result.matched.append((entry, [other for _, other in found]))
    for index, other in enumerate(input2):
        (result.matched2 if index in matched_in_2 else result.unmatched2).append(other)
    return result


def merge_matched(
    matched: list[tuple[Item, list[Item]]], clash: dict, join_mode: str = ""
) -> list[Item]:
    """n8n's mergeMatched: each input-1 item merged with its matches, clashes resolved."""
    resolve = clash.get("resolveClash")
    if resolve is None:
        resolve = "preferInput1" if join_mode == "enrichInput2" else "preferLast"
    combine = merger(clash)
    merged = []
    for entry, matches in matched:
        if resolve == "addSuffix":
            entry, matches = suffixed([entry], "1")[0], suffixed(matches, "2")
            order = [entry, *matches]
        elif resolve == "preferInput1":
            order = [*matches, entry]
        elif resolve == "preferLast":
            order = [entry, *matches]
        else:
            order = []
        merged.append(
            {
                "json": combine(*(i.get("json", {}) for i in order)),
                "pairedItem": [p for i in order for p in paired(i)],
            }
        )
    return merged
