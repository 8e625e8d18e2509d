"""`mini-n8n chat URL [--session ID]`: talk to a Chat Trigger from the terminal, in every
response mode, as n8n's `@n8n/chat` widget does.

Each line read from stdin is a chat message, sent as the widget sends it. What comes back depends
on the trigger's response mode:

- `streaming`: NDJSON chunks, printed as they arrive;
- `lastNode`, `responseNode`: one answer, its `output` (or `text`, `message`) printed;
- `responseNodes`: `{"executionStarted": true, "executionId", "resumeToken"?}` at once. Then, as
  the widget does, the client opens the chat WebSocket (`/chat?sessionId&executionId&isPublic`,
  plus `&token=` when the POST gave a resumeToken): each Chat node's message is printed, the next
  line is the reply, and the turn ends when the server closes the socket (the execution ended).

When is a line a reply? The server decides: a message for a session whose conversation is not
over is that conversation's next reply, taken by its next Chat node that waits, and one that no
Chat node waited for starts the session's next conversation, which the socket then follows. So
piped lines go at once, in order, each the session's next message. At a terminal a line typed
after a question goes at once too (the widget's rule); one typed while the bot is still talking
waits for the turn to end and is the next message.

One session id is kept for all lines: the one given, or a fresh one. With --session the earlier
conversation is shown first (when the trigger loads previous sessions). Basic auth goes in the
URL (http://user:password@host/webhook/...), and is sent on the socket too.
"""

from __future__ import annotations

import base64
import contextlib
import json
import queue
import sys
import threading
import uuid
from collections import deque
from typing import Any, TextIO
from urllib.parse import urlencode

import httpx
import simple_websocket

from core.answers import finished_text, output_text

TIMEOUT = httpx.Timeout(10.0, read=None)  # an answer may take long; keepalives arrive anyway
HEARTBEAT, HEARTBEAT_ACK, CONTINUE = "n8n|heartbeat", "n8n|heartbeat-ack", "n8n|continue"
# What the reader threads put on the one queue the client waits on.
LINE, EOF, FRAME, CLOSED = "line", "eof", "frame", "closed"


def chat(url: str, session: str | None = None, stdin: TextIO = sys.stdin) -> int:
    return ChatClient(url, session, stdin, sys.stdout, sys.stderr).run()


class ChatClient:
    def __init__(self, url: str, session: str | None, stdin: TextIO, out: TextIO, err: TextIO):
        self.url, self.out, self.err = url, out, err
        self.given_session = session
        self.session_id = session or str(uuid.uuid4())
        self.stdin = stdin
        self.interactive = stdin.isatty()
        self.events: queue.Queue[tuple[str, str | None]] = queue.Queue()
        self.held: deque[str] = deque()  # lines read while they could not be sent yet
        self.input_ended = False
        self.failed = False

    def run(self) -> int:
        with httpx.Client(timeout=TIMEOUT) as http:
            self.http = http
            try:
                if self.given_session:
                    self.show_history()
            except httpx.HTTPError as error:
                print(f"cannot reach {_safe(self.url)}: {error}", file=self.err)
                return 1
            print(
                f"session {self.session_id} - one message per line, Ctrl-D to quit", file=self.err
            )
            threading.Thread(target=self._read_input, daemon=True).start()
            while (message := self.next_message()) is not None:
                try:
                    self.send(message)
                except httpx.HTTPError as error:
                    print(f"error: cannot reach {_safe(self.url)}: {error}", file=self.err)
                    return 1
        return 1 if self.failed else 0

    def _read_input(self) -> None:
        for line in iter(self.stdin.readline, ""):
            self.events.put((LINE, line))
        self.events.put((EOF, None))

    def next_message(self) -> str | None:
        """The next non-empty line to send as a new message; None once the input has ended."""
        while True:
            if self.held:
                return self.held.popleft()
            if self.input_ended:
                return None
            self.prompt()
            kind, data = self.events.get()
            if kind == EOF:
                self.input_ended = True
            elif kind == LINE and data and data.strip():
                return data.strip()
            # an empty line, or a frame of a socket that has closed: nothing to send

    def prompt(self) -> None:
        if self.interactive:
            self.out.write("you> ")
            self.out.flush()

    # --- one message over HTTP ----------------------------------------------------------------
    def send(self, message: str) -> None:
        """Send one message and print the answer as it arrives."""
        body = {"action": "sendMessage", "sessionId": self.session_id, "chatInput": message}
        headers = {"Accept": "application/x-ndjson, application/json"}
        with self.http.stream("POST", self.url, json=body, headers=headers) as response:
            self.session_id = response.headers.get("X-Session-Id", self.session_id)
            if response.status_code >= 400:
                response.read()
                print(f"error: {response.status_code} {_error_text(response)}", file=self.err)
                self.failed = True
                return
            if "ndjson" in response.headers.get("Content-Type", ""):
                self.out.write("bot> ")
                self.out.flush()
                self.failed |= not print_stream(response.iter_lines(), self.out, self.err)
                self.out.write("\n")
                self.out.flush()
                return
            response.read()
            answer = _json(response)
        if (
            isinstance(answer, dict)
            and answer.get("executionStarted")
            and answer.get("executionId")
        ):
            self.converse(str(answer["executionId"]), answer.get("resumeToken"))
            return
        self.out.write(f"bot> {output_text(answer)}\n")
        self.out.flush()

    def show_history(self) -> None:
        body = {"action": "loadPreviousSession", "sessionId": self.session_id}
        response = self.http.post(self.url, json=body)
        if response.status_code >= 400:
            return
        for message in (_json(response) or {}).get("data") or []:
            kind = (message.get("id") or [""])[-1]
            content = (message.get("kwargs") or {}).get("content")
            if isinstance(content, str) and content:
                who = "you" if kind == "HumanMessage" else "bot"
                self.out.write(f"{who}> {content}\n")
        self.out.flush()

    # --- responseNodes: the chat WebSocket ------------------------------------------------------
    def converse(self, execution_id: str, token: Any) -> None:
        """Show the conversation's Chat-node messages and send the replies, until it ends. At a
        terminal a reply goes over the socket, as the widget sends it. Piped lines go by POST,
        each the session's next message (the server keeps them in order: api/conversation.py),
        so none is lost to a socket that closes as its execution ends; a line that started the
        session's next conversation is read on a socket of its own once this one closes."""
        later: deque[tuple[str, Any]] = deque()  # conversations a piped line started
        turn, current = Turn(), execution_id
        ws = self._open(current, token)
        if ws is None:
            return
        if not self.interactive:  # piped lines read meanwhile: the session's next messages
            while self.held:
                self._post(turn, current, later, self.held.popleft())
        try:
            while True:
                kind, data = self.events.get()
                if kind == CLOSED:
                    if not later:
                        return
                    (current, token), turn = later.popleft(), Turn(late=True)
                    if (ws := self._open(current, token)) is None:
                        return
                elif kind == FRAME and data is not None:
                    self.on_frame(ws, turn, data)
                elif kind == LINE and data and data.strip():
                    if not self.interactive:
                        self._post(turn, current, later, data.strip())
                    elif turn.waits or turn.asked:
                        self.reply(ws, turn, data.strip())
                    else:
                        self.held.append(data.strip())  # typed mid-turn: the next message
                elif kind == EOF:
                    self.input_ended = True
                if turn.waits and not self.held and self.input_ended and not later:
                    print("the chat waits for a reply, and the input has ended", file=self.err)
                    return
        finally:
            with contextlib.suppress(simple_websocket.ConnectionClosed):  # closed by the server
                ws.close()

    def _open(self, execution_id: str, token: Any):
        url = socket_url(self.url, self.session_id, execution_id, token)
        try:
            ws = simple_websocket.Client.connect(url, headers=_auth_headers(self.url))
        except (OSError, simple_websocket.ConnectionError) as error:
            print(f"error: cannot open the chat socket: {error}", file=self.err)
            self.failed = True
            return None
        threading.Thread(target=self._read_socket, args=(ws,), daemon=True).start()
        return ws

    def _post(self, turn: Turn, current: str, later: deque, text: str) -> None:
        """A piped line, by POST: the reply of the conversation on the socket (queued until its
        next Chat node waits), or the start of the session's next one."""
        body = {"action": "sendMessage", "sessionId": self.session_id, "chatInput": text}
        try:
            response = self.http.post(self.url, json=body)
        except httpx.HTTPError as error:
            print(f"error: cannot reach {_safe(self.url)}: {error}", file=self.err)
            self.failed = True
            return
        answer = _json(response)
        if response.status_code >= 400 or not isinstance(answer, dict):
            print(f"error: {response.status_code} {_error_text(response)}", file=self.err)
            self.failed = True
            return
        execution_id = str(answer.get("executionId") or "")
        if execution_id == current:
            turn.owed += 1
            turn.asked = turn.waits = False
        elif execution_id and execution_id not in (e for e, _ in later):
            later.append((execution_id, answer.get("resumeToken")))

    def _read_socket(self, ws) -> None:
        try:
            while True:
                frame = ws.receive()
                if frame is not None:
                    text = frame if isinstance(frame, str) else frame.decode("utf-8", "replace")
                    self.events.put((FRAME, text))
        except (simple_websocket.ConnectionClosed, OSError):
            pass
        finally:  # whatever broke the socket, the conversation loop must hear that it ended
            self.events.put((CLOSED, None))

    def on_frame(self, ws, turn: Turn, frame: str) -> None:
        control = _control(frame)
        first, turn.frames = not turn.frames, turn.frames + (control != "heartbeat")
        if control == "heartbeat":
            _send(ws, HEARTBEAT_ACK)
            turn.quiet += 1
            if turn.unanswered and not turn.waits and turn.waits_for_us():
                turn.waits = True  # quiet after a question, no reply of ours on its way
                if self.held:
                    self.reply(ws, turn, self.held.popleft())
                else:
                    self.prompt()
        elif control == "continue":
            turn.asked = turn.unanswered = False  # that Chat node waits for no reply
        elif control == "error":
            message = json.loads(frame).get("message") or "Unknown error"
            if turn.late and first and message == finished_text("success"):
                return  # the socket before this one followed it there and showed it all
            print(f"error: {message}", file=self.err)
            self.failed = True
        else:
            self.out.write(f"bot> {frame}\n")
            self.out.flush()
            if turn.unanswered:  # the question before this one waited, and took a reply
                turn.owed = max(turn.owed - 1, 0)
            turn.asked = turn.unanswered = True
            turn.waits, turn.quiet = False, 0

    def reply(self, ws, turn: Turn, text: str) -> None:
        body = {"sessionId": self.session_id, "action": "sendMessage", "chatInput": text}
        _send(ws, json.dumps({**body, "files": []}))
        turn.asked = turn.waits = False
        turn.owed += 1


class Turn:
    """Where one responseNodes conversation stands, as the client can tell from the frames."""

    # Quiet heartbeats after which a question counts as waiting even though a reply of ours
    # seemed on its way (one that started the session's next conversation, say, which the
    # frames do not show).
    PATIENCE = 3

    def __init__(self, late: bool = False) -> None:
        # A socket opened for a conversation a piped line started, once the one before closed:
        # that one may have followed the session there already (api/chat_feed.py).
        self.late = late
        self.frames = 0  # frames other than heartbeats so far
        self.asked = False  # a message came, and no `n8n|continue` or reply of ours after it
        self.unanswered = False  # a message came and no `n8n|continue` after it
        self.waits = False  # ... and then quiet: the execution waits for a reply
        self.owed = 0  # replies sent that no wait has taken yet (the server keeps them queued)
        self.quiet = 0  # heartbeats since the last message

    def waits_for_us(self) -> bool:
        return self.owed == 0 or self.quiet >= self.PATIENCE


def socket_url(url: str, session_id: str, execution_id: str, token: Any) -> str:
    """n8n's chat socket on the chat URL's origin, as `@n8n/chat` builds it."""
    parsed = httpx.URL(url)
    params = {"sessionId": session_id, "executionId": execution_id, "isPublic": "true"}
    if isinstance(token, str) and token:
        params["token"] = token
    scheme = "wss" if parsed.scheme == "https" else "ws"
    netloc = parsed.netloc.decode("ascii").rsplit("@", 1)[-1]  # the login goes in a header
    return f"{scheme}://{netloc}/chat?{urlencode(params)}"


def _send(ws, frame: str) -> None:
    with contextlib.suppress(simple_websocket.ConnectionClosed):  # the reader reports the end
        ws.send(frame)


def _auth_headers(url: str) -> dict[str, str]:
    parsed = httpx.URL(url)
    if not parsed.username:
        return {}
    login = f"{parsed.username}:{parsed.password or ''}".encode()
    return {"Authorization": "Basic " + base64.b64encode(login).decode("ascii")}


def _control(frame: str) -> str | None:
    """heartbeat, continue or error for the server's control frames (both spellings @n8n/chat
    1.37 reads); None for a Chat node's message."""
    if frame == HEARTBEAT:
        return "heartbeat"
    if frame == CONTINUE:
        return "continue"
    if not frame.startswith("{"):
        return None
    try:
        body = json.loads(frame)
    except ValueError:
        return None
    kind = body.get("type") if isinstance(body, dict) else None
    return kind if kind in ("heartbeat", "continue", "error") else None


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
