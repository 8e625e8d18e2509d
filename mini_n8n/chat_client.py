"""`mini-n8n chat URL [--session ID]`: talk to a Chat Trigger from the terminal.

Each line read from stdin is sent as a chat message; a streamed answer is printed as its chunks
arrive, a JSON answer (`lastNode`) when it comes. One session id is kept for all lines: the one
given, or a fresh one. With --session the earlier conversation is shown first (when the trigger
loads previous sessions). Basic auth goes in the URL: http://user:password@host/webhook/...
"""

from __future__ import annotations

import json
import sys
import uuid
from typing import Any, TextIO

import httpx

from core.answers import output_text

TIMEOUT = httpx.Timeout(10.0, read=None)  # an answer may take long; keepalives arrive anyway


def chat(url: str, session: str | None = None, stdin: TextIO = sys.stdin) -> int:
    out, err = sys.stdout, sys.stderr
    session_id = session or str(uuid.uuid4())
    interactive = stdin.isatty()
    with httpx.Client(timeout=TIMEOUT) as client:
        try:
            if session:
                show_history(client, url, session_id, out)
        except httpx.HTTPError as error:
            print(f"cannot reach {_safe(url)}: {error}", file=err)
            return 1
        print(f"session {session_id} - one message per line, Ctrl-D to quit", file=err)
        status = 0
        while True:
            if interactive:
                out.write("you> ")
                out.flush()
            line = stdin.readline()
            if not line:
                return status
            message = line.strip()
            if not message:
                continue
            try:
                session_id, ok = send(client, url, session_id, message, out, err)
            except httpx.HTTPError as error:
                print(f"error: cannot reach {_safe(url)}: {error}", file=err)
                return 1
            status = status or (0 if ok else 1)


def send(client, url, session_id, message, out, err) -> tuple[str, bool]:
    """Send one message and print the answer as it arrives. Returns (session id, success)."""
    body = {"action": "sendMessage", "sessionId": session_id, "chatInput": message}
    headers = {"Accept": "application/x-ndjson, application/json"}
    with client.stream("POST", url, json=body, headers=headers) as response:
        session_id = response.headers.get("X-Session-Id", session_id)
        if response.status_code >= 400:
            response.read()
            print(f"error: {response.status_code} {_error_text(response)}", file=err)
            return session_id, False
        out.write("bot> ")
        out.flush()
        if "ndjson" in response.headers.get("Content-Type", ""):
            ok = print_stream(response.iter_lines(), out, err)
        else:
            response.read()
            out.write(output_text(_json(response)))
            ok = True
        out.write("\n")
        out.flush()
        return session_id, ok


def print_stream(lines, out: TextIO, err: TextIO) -> bool:
    ok = True
    for line in lines:
        if not line.strip():
            continue
        try:
            chunk = json.loads(line)
        except ValueError:
            chunk = {"type": "item", "content": line}
        if chunk.get("type") == "item":
            content = chunk.get("content", "")
            out.write(content if isinstance(content, str) else json.dumps(content))
            out.flush()
        elif chunk.get("type") == "error":
            out.flush()
            print(f"\nerror: {chunk.get('content') or 'Unknown error'}", file=err)
            ok = False
    return ok


def show_history(client, url: str, session_id: str, out: TextIO) -> None:
    body = {"action": "loadPreviousSession", "sessionId": session_id}
    response = client.post(url, json=body)
    if response.status_code >= 400:
        return
    for message in (_json(response) or {}).get("data") or []:
        kind = (message.get("id") or [""])[-1]
        content = (message.get("kwargs") or {}).get("content")
        if isinstance(content, str) and content:
            who = "you" if kind == "HumanMessage" else "bot"
            out.write(f"{who}> {content}\n")
    out.flush()


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text


def _error_text(response: httpx.Response) -> str:
    body = _json(response)
    if isinstance(body, dict):
        return ": ".join(str(body[k]) for k in ("message", "error") if body.get(k))
    return str(body)


def _safe(url: str) -> str:
    """The URL without its password, for messages."""
    parsed = httpx.URL(url)
    return str(parsed.copy_with(password=None)) if parsed.password else url
