"""The editor's REST api under /rest: workflows, manual chat runs, executions, chat sessions.

Every route needs the api key (see `api.rest.auth`). Views validate, hand off to the stores in
`api.runtime` and answer JSON; errors go through `api.errors`.
"""

from __future__ import annotations

from flask import Blueprint

from api.rest import auth

bp = Blueprint("rest", __name__, url_prefix="/rest")
bp.before_request(auth.require_key)

# The route modules register themselves on `bp`.
from api.rest import executions, sessions, workflows  # noqa: E402, F401
