"""The Chat Hub's REST api under /rest/chat, with n8n's routes, bodies and shapes: results
wrapped in `{"data": …}`, errors `{"code", "message"}` (the status again in `code`, as n8n's).

| route                                                        | does                          |
|--------------------------------------------------------------|-------------------------------|
| POST   /rest/chat/models                                     | agents and models to pick     |
| GET    /rest/chat/conversations?limit=&cursor=               | the user's conversations      |
| GET    /rest/chat/conversations/:id                          | one, with its message tree    |
| PATCH  /rest/chat/conversations/:id                          | rename, switch agent          |
| DELETE /rest/chat/conversations/:id                          | delete, files and all         |
| POST   /rest/chat/conversations/send                         | a message -> a reply streams  |
| POST   /rest/chat/conversations/:id/messages/:mid/edit       | a revision -> a new branch    |
| POST   /rest/chat/conversations/:id/messages/:mid/regenerate | another answer                |
| POST   /rest/chat/conversations/:id/messages/:mid/stop       | stop a running answer         |
| POST   /rest/chat/conversations/:id/reconnect?lastSequence=n | the events missed             |
| GET    /rest/chat/conversations/:id/messages/:mid/attachments/:i | a message's file          |
| GET    /rest/chat/agents, POST /rest/chat/agents             | personal agents               |
| GET|PATCH|POST|DELETE /rest/chat/agents/:id                 | one personal agent            |
| GET    /rest/chat/tools                                      | the tools an agent may have   |
| GET    /rest/chat/push                                       | the user's events (SSE)       |

Who asks and what they may do: api/hub_identity.py. Bodies follow the rest of the api's rules:
received under the REST door's limit (api/body_limit.py), JSON only (a page of another site
cannot send JSON without a preflight we never answer), and the sign-in's CSRF rules. A user
reads and changes only their own conversations and agents: another's answers 404.
"""

from __future__ import annotations

import json

from flask import Blueprint, Response, request

from api import bodies, hub_identity
from api.errors import response_for

bp = Blueprint("chat_hub", __name__, url_prefix="/rest/chat")
bp.before_request(hub_identity.require_hub_user)


@bp.before_request
def _json_bodies_only() -> None:
    bodies.require_json(request)


@bp.errorhandler(Exception)
def _n8n_error(err: Exception) -> Response:
    """n8n's error shape: `{"code": <status>, "message"}`."""
    response = response_for(err)
    try:
        body = json.loads(response.get_data())
    except ValueError:
        return response
    if isinstance(body, dict):
        response.set_data(json.dumps({"code": response.status_code, **body}))
    return response


# The route modules register themselves on `bp`.
from api.hub import agents, conversations, messages, models, push  # noqa: E402, F401
