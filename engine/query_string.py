"""Query strings and form bodies as the HTTP Request node's libraries write them, so a server sees
the same bytes from mini-n8n as from n8n 2.41.1: the `qs` package's stringify, for query
parameters (arrays as indices, `a[0]=1&a[1]=2`, unless the option "Array Format in Query
Parameters" says otherwise) and form-urlencoded bodies alike (recorded on n8n:
tests/n8n_outputs/http_request/).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, quote

from core.jsontext import dumps

_RFC3986_SAFE = "-_.~"  # what qs leaves as it is, beside letters and digits


def _scalar(value: Any) -> str:
    """A value as JavaScript's String() writes it."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    if isinstance(value, dict | list):
        return dumps(value)
    return str(value)


def _qs_pairs(key: str, value: Any, array_format: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, dict):
        for name, item in value.items():
            yield from _qs_pairs(f"{key}[{name}]", item, array_format)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            inner = {"indices": f"{key}[{index}]", "brackets": f"{key}[]"}.get(array_format, key)
            yield from _qs_pairs(inner, item, array_format)
    elif value is None:
        yield key, ""  # qs without strictNullHandling: `key=`
    else:
        yield key, _scalar(value)


def qs_stringify(data: dict[str, Any], array_format: str = "indices") -> str:
    """The `qs` package's stringify (RFC 3986 escaping, keys too): `array_format` is its
    indices (default), brackets or repeat."""
    return "&".join(
        f"{quote(k, safe=_RFC3986_SAFE)}={quote(v, safe=_RFC3986_SAFE)}"
        for name, value in data.items()
        for k, v in _qs_pairs(name, value, array_format)
    )


def with_query(url: str, query: str) -> str:
    """`url` with `query` appended, after its own query if it has one."""
    if not query:
        return url
    base = url.partition("#")[0]  # a fragment never goes to the server
    return f"{base}{'&' if '?' in base else '?'}{query}"


def search_params(text: str) -> dict[str, str]:
    """`Object.fromEntries(new URLSearchParams(text))`: a form body written as one field."""
    return dict(parse_qsl(text.lstrip("?"), keep_blank_values=True))
