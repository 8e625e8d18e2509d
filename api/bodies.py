"""Request bodies as JSON, parsed one way everywhere: bounded in depth, JSON's own literals only,
numbers as JavaScript reads them (see core.jsontext). A body that fails gets a 400 and starts
nothing."""

from __future__ import annotations

from typing import Any

from flask import Request

from api.errors import ApiError
from core.jsontext import JSONTextError, loads_request


def json_value(request: Request) -> Any:
    """The body as any JSON value; an empty body is None."""
    data = request.get_data(cache=True)
    if not data:
        return None
    return parse(data)


def json_object(request: Request) -> dict[str, Any]:
    value = json_value(request)
    if not isinstance(value, dict):  # an empty body (None) included
        raise ApiError(400, "The request body must be a JSON object")
    return value


def parse(data: bytes | str) -> Any:
    try:
        return loads_request(data)
    except JSONTextError as err:
        raise ApiError(400, str(err)) from None
