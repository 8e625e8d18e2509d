"""Query strings and form bodies as the HTTP Request node's libraries write them, so a server sees
the same bytes from mini-n8n as from n8n: axios's parameter serializer (n8n's default for query
parameters), and the `qs` package's stringify (form-urlencoded bodies, and query parameters when
the option "Array Format in Query Parameters" is set).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, quote

from core.jsontext import dumps

# encodeURIComponent keeps these beside letters and digits; RFC 3986 (qs) keeps only -_.~
_URI_COMPONENT_SAFE = "-_.!~*'()"
_RFC3986_SAFE = "-_.~"


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


def _axios_encode(text: str) -> str:
    encoded = quote(text, safe=_URI_COMPONENT_SAFE)
    for escaped, plain in (("%3A", ":"), ("%24", "$"), ("%2C", ","), ("%20", "+")):
        encoded = encoded.replace(escaped, plain)
    return encoded


def _axios_pairs(key: str, value: Any) -> Iterator[tuple[str, str]]:
    """axios's toFormData walk with its defaults: a flat array as `key[]`, an object's fields as
    `key[field]`, an array of objects as `key[0][field]`; null and undefined left out."""
    if value is None:
        return
    if isinstance(value, dict):
        for name, item in value.items():
            yield from _axios_pairs(f"{key}[{name}]", item)
    elif isinstance(value, list):
        flat = not any(isinstance(item, dict | list) for item in value)
        for index, item in enumerate(value):
            yield from _axios_pairs(f"{key}[]" if flat else f"{key}[{index}]", item)
    else:
        yield key, _scalar(value)


def axios_params(params: dict[str, Any]) -> str:
    """axios's default serialization of `params` (its buildURL)."""
    return "&".join(
        f"{_axios_encode(k)}={_axios_encode(v)}"
        for name, value in params.items()
        for k, v in _axios_pairs(name, value)
    )


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
