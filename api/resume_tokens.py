"""n8n's `resumeToken`: what makes a reply over the chat WebSocket come from whoever started the
conversation, not from anyone who learnt its session and execution ids.

The responseNodes POST that starts (or resumes) an execution answers with the token; `@n8n/chat`
1.37 opens the socket with it as `&token=`, and the socket refuses a missing or wrong one. One
token per execution, random (192 bits), kept in Redis for as long as the execution record
(`execution:<id>:token`), compared in constant time.
"""

from __future__ import annotations

import hmac
import secrets


def mint(rt, execution_id: str) -> str:
    """The execution's token: made on its first answer, the same on every later one (a POST that
    resumes a waiting execution answers with the token its socket already holds)."""
    key = rt.keys.execution_token(execution_id)
    token = secrets.token_urlsafe(24)
    if rt.redis.set(key, token, nx=True, ex=rt.settings.executions_ttl):
        return token
    return rt.redis.get(key) or token


def valid(rt, execution_id: str, token: str) -> bool:
    expected = rt.redis.get(rt.keys.execution_token(execution_id))
    return bool(expected) and hmac.compare_digest(expected.encode(), token.encode())
