"""The editor's REST api under /rest. Every route needs a sign-in: the api key, or a session
cookie (see `api.rest.auth`); what each role may reach is api/access.py's.

| route                                   | does                                               |
|-----------------------------------------|----------------------------------------------------|
| GET    /rest/workflows                  | {"data": [{id, name, active, tags}]}               |
| POST   /rest/workflows                  | store a new workflow (n8n JSON) -> 201 + it        |
| GET    /rest/workflows/<id>             | the stored workflow JSON                           |
| PUT    /rest/workflows/<id>             | replace it (PATCH: merge top-level fields); a      |
|                                         |   stale "versionId" -> 409; each save a new one    |
| DELETE /rest/workflows/<id>             | delete it (and its webhooks)                       |
| POST   /rest/workflows/<id>/activate    | register its webhooks -> it + "warnings"           |
| POST   /rest/workflows/<id>/deactivate  | drop its webhooks                                  |
| POST   /rest/workflows/<id>/chat        | manual run {sessionId, chatInput, pushRef}         |
|                                         |   -> {"executionId", "sessionId"} at once          |
| GET    /rest/executions?workflowId=&limit= | {"data": [records without run data]}, newest first |
| GET    /rest/executions/<id>            | the record with runData                            |
| POST   /rest/executions/<id>/stop       | cancel if queued, else ask its worker -> record    |
| GET    /rest/sessions                   | {"data": [public chats' session ids in Redis Chat  |
|                                         |   Memory], "protected": [{workflowId, id}]}        |
| GET    /rest/sessions/<id>[?workflowId=] | {"id", "messages": [{role, content}]}; a          |
|                                         |   protected chat's session with its workflowId     |
| DELETE /rest/sessions/<id>[?workflowId=] | clear it                                          |
| GET    /rest/push?pushRef=&key=         | the tab's events over SSE (`api.push`)             |
| GET    /rest/node-types                 | {"data": [each node type's description]}           |
| GET    /rest/credentials                | {"data": [{id, name, type}]}: never the data       |
| POST   /rest/expressions/preview        | {workflowId, executionId, node, expression} ->     |
|                                         |   {"result"} or {"error"} (engine/preview.py)      |
| GET|POST /rest/users, DELETE /rest/users/<id>, PATCH /rest/users/<id>/role,             |
| PATCH  /rest/me/password                | people and passwords (`api.rest.users`)            |

Views validate, hand off to the stores in `api.runtime` and answer JSON; errors are ApiError
(and the stores' own errors), turned into `{"message": ...}` by `api.errors`.
"""

from __future__ import annotations

from flask import Blueprint, request

from api import bodies
from api.rest import auth

bp = Blueprint("rest", __name__, url_prefix="/rest")
bp.before_request(auth.require_signed_in)


@bp.before_request
def _json_bodies_only() -> None:
    bodies.require_json(request)  # received under the REST door's limit (api/body_limit.py)


# The route modules register themselves on `bp`.
from api.rest import (  # noqa: E402, F401
    credentials,
    executions,
    expressions,
    node_types,
    sessions,
    users,
    workflows,
)
