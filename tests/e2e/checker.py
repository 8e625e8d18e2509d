"""The checker every fault case runs once its fault is over: what each client was told is what
the execution's record says and what the session's memory holds, nothing is left unfinished, and
every session answers its next message (docs/architecture.md, "Delivery semantics", "Every state
has a way out", "What each fault does").

A case sends its messages through a `Checker` (`stream`, `conversation`), which keeps what each
client was told (`Told`); after the fault, `check()` asserts, within the case's bound:

- every stream ended: its NDJSON with `end` or `error` (a clear one), a Chat node's socket with its
  answer and a normal close, or an error frame; a POST refused with a JSON error started nothing;
- stream outcome = record status = memory: `end` has a `success` record and its turn (the user's
  message and the answer the client saw) once in the session's memory; `error` has an `error`,
  `canceled` or `crashed` record, and for `crashed` no turn of that message in memory;
- no execution of the case's sessions is left `new` or `running`;
- no memory turn lost or doubled: the user messages in each session's memory are exactly the
  messages whose clients were told `end`;
- the next message in every session is answered whole (and a streaming chat's from the context its
  client saw: "What is my name?" names the last name it was told was heard).
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import httpx
import redis
from websockets.exceptions import ConnectionClosed, ConnectionClosedOK
from websockets.sync.client import ClientConnection

from engine.nodes.lm_chat_mock import NAME_IS
from tests.chat.conversation import CONTINUE, HEARTBEAT, open_chat, reply, start
from tests.e2e.deployment import Deployment, chat_url
from tests.waiting import wait_until

FAILED = {"error", "canceled", "crashed"}
FINISHED = FAILED | {"success"}
# An error a person can read: not a traceback, nor an exception's repr.
UNCLEAR = re.compile(r"Traceback|\b\w+(Error|Exception)\(|<[\w.]+ object at ")


def name() -> str:
    """A fresh name for "my name is …": letters only, so the mock model never sees arithmetic."""
    return "Ada" + "".join(chr(ord("a") + int(c, 16)) for c in uuid.uuid4().hex[:6])


@dataclass
class Told:
    """What one client was told about one message."""

    session: str
    text: str  # the message as its turn would remember it
    workflow: dict
    step: str = ""  # where its execution was staged for the fault (for the report)
    at_fault: str | None = None  # its record's status just before the fault
    execution_id: str | None = None
    items: int = 0  # item lines its client has read so far (a stream)
    # end, error, refused; cut (the connection broke), closed (a socket closed without a word);
    # None while its client waits
    outcome: str | None = None
    answer: str = ""  # the answer (end), or the error's words
    notes: list[str] = field(default_factory=list)  # errors told before its reply (a socket)
    ended_at: float | None = None
    before_wipe: bool = False  # sent before Redis restarted empty
    client: threading.Thread | None = field(default=None, repr=False)  # reading its answer

    def wait(self, timeout: float) -> Told:
        """Until its client was told an end (or `timeout`)."""
        if self.client is not None:
            self.client.join(timeout)
        return self

    def ended(self, outcome: str, answer: str = "") -> None:
        self.outcome, self.answer, self.ended_at = outcome, answer, time.monotonic()


class Conversation:
    """A Chat-node conversation over n8n's chat socket (responseNodes): the POST that starts it,
    the question, a reply; then frames are read, in a thread, until the socket closes."""

    def __init__(self, checker: Checker, workflow: dict, session: str, step: str = ""):
        self.checker, self.workflow, self.session = checker, workflow, session
        self.told = Told(session, "", workflow, step)
        self.ws: ClientConnection | None = None
        self.sockets = contextlib.ExitStack()  # every socket it opened, closed by `close`

    def ask(self, first: str) -> Conversation:
        """Start it and read its question (`first`); the socket stays open."""
        self.told.execution_id = start(self.checker.base(), self.workflow, self.session)
        self.checker.told.append(self.told)
        self._open()
        try:
            question = self._next_text(self.checker.bound)
        except TimeoutError:
            raise AssertionError(f"{_who(self.told)}: no question within the bound") from None
        assert question == first, f"{_who(self.told)}: asked {question!r}"
        return self

    def reply(self, text: str) -> None:
        """Reply and read what follows. A socket that was closed, or said it broke, meanwhile
        is left for a new one, as the widget reconnects."""
        self.told.text, self.told.outcome = text, None
        noted = len(self.told.notes)
        if self._closed() or len(self.told.notes) > noted:
            self._open()
        assert self.ws is not None
        try:
            reply(self.ws, self.session, text)
        except ConnectionClosed as closed:  # closed as the reply went out: once more, anew
            self.told.notes.append(_close(closed))
            self._open()
            reply(self.ws, self.session, text)
        self.read_on()

    def see_the_socket_close(self) -> None:
        """Wait until the client has seen its socket close (its server was killed), as the
        widget sees the close before its user's next message goes out on a new socket."""
        wait_until(self._closed, self.checker.bound, f"{_who(self.told)}: its socket to close")

    def read_on(self) -> None:
        """Read what follows, in a thread, until the socket closes."""
        self.told.client = threading.Thread(target=self._read_to_the_end, daemon=True)
        self.told.client.start()

    def _open(self) -> None:
        socket = open_chat(self.checker.base(), self.session, str(self.told.execution_id))
        self.ws = self.sockets.enter_context(socket)

    def _closed(self) -> bool:
        """Is the socket gone? The error frames it got meanwhile are noted."""
        if self.ws is None:
            return True
        try:
            while True:
                self._note(self.ws.recv(timeout=0))
        except TimeoutError:
            return False
        except ConnectionClosed:
            return True

    def _note(self, frame: str | bytes) -> None:
        with contextlib.suppress(ValueError, TypeError):
            body = json.loads(frame)
            if isinstance(body, dict) and body.get("type") == "error":
                self.told.notes.append(str(body.get("message")))

    def _next_text(self, timeout: float) -> str:
        assert self.ws is not None
        deadline = time.monotonic() + timeout
        while True:
            frame = self.ws.recv(timeout=max(deadline - time.monotonic(), 0))
            assert isinstance(frame, str)
            if frame == HEARTBEAT:
                with contextlib.suppress(ConnectionClosed):
                    self.ws.send("n8n|heartbeat-ack")
            elif frame != CONTINUE:
                return frame

    def _read_to_the_end(self) -> None:
        answer, error = "", None
        try:
            while True:
                frame = self._next_text(self.checker.bound * 4)
                if frame.startswith('{"type":"error"'):
                    error = str(json.loads(frame).get("message"))
                else:
                    answer = frame
        except ConnectionClosedOK:
            # closed at the end of the execution, having said how it ended, or without a word
            self.told.ended(*(("error", error) if error else ("end", answer) if answer else
                              ("closed", "")))  # fmt: skip
        except ConnectionClosed as closed:
            self.told.ended(*(("error", error) if error else ("cut", _close(closed))))
        except OSError as err:
            self.told.ended(*(("error", error) if error else ("cut", repr(err))))
        except TimeoutError:
            pass  # never ended: `check` says so

    def close(self) -> None:
        self.sockets.close()


class Checker:
    """The messages of one fault case, and the checks that must hold after its fault."""

    def __init__(self, deploy: Deployment, base: Callable[[], str], bound: float):
        self.deploy, self.base, self.bound = deploy, base, bound
        self.told: list[Told] = []
        self.conversations: list[Conversation] = []
        self.cut_ok = False

    # --- the clients ------------------------------------------------------------------------
    def stream(
        self, workflow: dict, session: str, text: str, step: str = "", wait: bool = True
    ) -> Told:
        """Send a streaming chat message, read in a thread; `.execution_id` is set once its
        response began (waited for unless `wait` is False: a message behind another in its
        session gets its headers with its first line)."""
        told = Told(session, text, workflow, step)
        self.told.append(told)
        began = threading.Event()
        told.client = threading.Thread(target=self._stream, args=(told, began), daemon=True)
        told.client.start()
        assert began.wait(self.bound) if wait else True, f"no answer began for {text!r}"
        return told

    def _stream(self, told: Told, began: threading.Event) -> None:
        body = {"action": "sendMessage", "sessionId": told.session, "chatInput": told.text}
        try:
            url = chat_url(self.base(), told.workflow)
            with httpx.stream("POST", url, json=body, timeout=self.bound * 4) as response:
                told.execution_id = response.headers.get("x-execution-id", told.execution_id)
                began.set()
                if response.status_code != 200:
                    response.read()
                    return told.ended("refused", _refusal(response))
                _read_ndjson(told, response)
        except httpx.HTTPError as err:
            told.ended("cut", repr(err))
        finally:
            began.set()

    def conversation(self, workflow: dict, session: str, step: str = "") -> Conversation:
        conversation = Conversation(self, workflow, session, step)
        self.conversations.append(conversation)
        return conversation

    def wiped(self) -> None:
        """Redis restarted empty: what was told before may be gone from records and memory."""
        for told in self.told:
            told.before_wipe = True

    # --- the checks -------------------------------------------------------------------------
    def check(self, *, cut_ok: bool = False, next_message: bool = True) -> None:
        """Everything the module docstring says, within the bound. `cut_ok`: a client's
        connection may have been cut (its api was killed)."""
        self.cut_ok = cut_ok
        self._every_client_ended()
        records = self._nothing_left_unfinished()
        for told in self.told:
            self._told_is_recorded(told, records.get(told.execution_id or ""))
        for session, workflow in self._sessions().items():
            self._memory_is_what_was_told(session, workflow)
        if next_message:
            self._next_messages_are_answered()

    def _every_client_ended(self) -> None:
        deadline = time.monotonic() + self.bound
        for told in self.told:
            told.wait(max(deadline - time.monotonic(), 0))
        for told in self.told:
            assert told.outcome is not None, (
                f"{_who(told)}: its client was never told an end (its record: {self._status(told)})"
            )
            allowed = {"end", "error", "refused"} | ({"cut"} if self.cut_ok else set())
            assert told.outcome in allowed, f"{_who(told)}: {told.outcome} {told.answer!r}"
            if told.outcome in ("error", "refused"):
                assert told.answer.strip() and not UNCLEAR.search(told.answer), _who(told)
        for conversation in self.conversations:
            conversation.close()

    def _nothing_left_unfinished(self) -> dict[str, dict]:
        """The records of every execution of the case's sessions, once none is new or running
        (waiting is a deliberate state)."""
        seen: dict[str, object] = {}

        def settled() -> tuple[dict[str, dict]] | None:
            try:
                seen["records"] = records = self._records()
            except redis.RedisError as err:
                seen["records"] = err
                return None
            if all(r["status"] in FINISHED | {"waiting"} for r in records.values()):
                return (records,)  # none at all (Redis lost them) is settled too
            return None

        try:
            return wait_until(settled, self.bound, "every execution to end")[0]
        except AssertionError:
            last = seen.get("records")
            if isinstance(last, dict):
                last = {i: r["status"] for i, r in last.items() if r["status"] not in FINISHED}
            raise AssertionError(f"left unfinished after {self.bound:g} s: {last!r}") from None

    def _records(self) -> dict[str, dict]:
        sessions = set(self._sessions())
        records: dict[str, dict] = {}
        for workflow in {w["id"]: w for w in (t.workflow for t in self.told)}.values():
            key = self.deploy.keys.workflow_executions(workflow["id"])
            for execution_id in self.deploy.redis.zrange(key, 0, -1):
                record = self.deploy.execution(execution_id)
                if record and record.get("sessionId") in sessions:
                    records[execution_id] = record
        return records

    def _told_is_recorded(self, told: Told, record: dict | None) -> None:
        status = record and record["status"]
        if told.outcome == "refused" and told.execution_id is None:
            return  # nothing was started
        if record is None:
            assert told.before_wipe, f"{_who(told)}: no record of an execution that answered"
            return
        if told.outcome == "end":
            assert status == "success", f"{_who(told)} was told `end`; the record: {status}"
        elif told.outcome in ("error", "refused"):
            assert status in FAILED, (
                f"{_who(told)} was told {told.answer!r}; the record says {status}"
            )

    def _status(self, told: Told) -> str | None:
        record = told.execution_id and self.deploy.execution(told.execution_id)
        return record["status"] if record else None

    def _sessions(self) -> dict[str, dict]:
        return {t.session: t.workflow for t in self.told}

    def _memory_is_what_was_told(self, session: str, workflow: dict) -> None:
        if not _remembers(workflow):
            return
        turns = self._turns(session)
        told = [t for t in self.told if t.session == session]
        for t in told:
            heard = [answer for text, answer in turns if text == t.text]
            if t.outcome == "end" and not t.before_wipe:
                assert heard == [t.answer], f"{_who(t)} was told {t.answer!r}; memory: {heard}"
            elif t.outcome == "end" or (t.outcome == "cut" and self.cut_ok):
                assert len(heard) <= 1, f"{_who(t)}: its turn is in memory {len(heard)} times"
            else:
                assert heard == [], f"{_who(t)} was told {t.outcome} {t.answer!r}; memory: {heard}"
        unknown = [text for text, _ in turns if text not in {t.text for t in told}]
        assert unknown == [], f"session {session}: memory holds turns nobody sent: {unknown}"

    def _turns(self, session: str) -> list[tuple[str, str]]:
        """The session's memory as (user message, the last AI message of its turn), oldest first."""
        turns: list[tuple[str, str]] = []
        for message in reversed(self.deploy.chat_list(session)):
            content = str(message["data"]["content"])
            if message["type"] == "human":
                turns.append((content, ""))
            elif message["type"] == "ai" and turns and content:
                turns[-1] = (turns[-1][0], content)
        return turns

    # --- the next message -------------------------------------------------------------------
    def _next_messages_are_answered(self) -> None:
        """All sessions at once: each one's next message, and what must hold after it."""
        sessions = self._sessions()
        with ThreadPoolExecutor(max_workers=len(sessions) or 1) as pool:
            done = [pool.submit(self._next_message, s, w) for s, w in sessions.items()]
        for future in done:
            future.result()  # the first failure, raised here

    def _next_message(self, session: str, workflow: dict) -> None:
        if _streams(workflow):
            self._next_stream(session, workflow)
        else:
            self._next_conversation(session, workflow)

    def _next_stream(self, session: str, workflow: dict) -> None:
        expected = self._last_name(session)
        told = self.stream(workflow, session, "What is my name?", "next message").wait(self.bound)
        assert told.outcome == "end", f"{_who(told)}: {told.outcome} {told.answer!r}"
        self._still_true(session, workflow)
        assert told.answer == (f"Your name is {expected}." if expected else
                               "I don't know your name yet."), _who(told)  # fmt: skip

    def _last_name(self, session: str) -> str | None:
        """The name the session's last message told `end` said; a message whose client was cut
        off, or that was told `end` before Redis restarted empty, counts if its turn is there."""
        remembered = {text for text, _ in self._turns(session)}
        for told in reversed([t for t in self.told if t.session == session]):
            sure = told.outcome == "end" and not told.before_wipe
            maybe = told.outcome in ("end", "cut") and told.text in remembered
            if (sure or maybe) and (named := NAME_IS.search(told.text)):
                return named.group(1)
        return None

    def _next_conversation(self, session: str, workflow: dict) -> None:
        known = {t.execution_id for t in self.told}
        conversation = self.conversation(workflow, session, "next message")
        conversation.ask(_question(workflow))
        assert conversation.told.execution_id not in known, "no new conversation started"
        who = name()
        conversation.reply(f"my name is {who}" if _remembers(workflow) else who)
        told = conversation.told.wait(self.bound)
        assert told.outcome == "end" and told.answer == f"Nice to meet you, {who}!", _who(told)
        self._still_true(session, workflow)

    def _still_true(self, session: str, workflow: dict) -> None:
        """Every message of the session, the next one included, against its record and memory
        as they are now: nothing was written after its client was told."""
        for told in self.told:
            if told.session == session and told.execution_id:
                self._told_is_recorded(told, self.deploy.execution(told.execution_id))
        self._memory_is_what_was_told(session, workflow)

    # --- the report -------------------------------------------------------------------------
    def report(self, fault: str, at: float) -> list[str]:
        """One line per message told before the fault: step, what its client was told and
        when (seconds after `at`), what its record says."""
        lines = []
        for told in self.told:
            if told.step == "next message":
                continue
            record = self.deploy.execution(told.execution_id) if told.execution_id else None
            after = f"{told.ended_at - at:+.1f} s" if told.ended_at else "never"
            before = f" (told before its reply: {told.notes})" if told.notes else ""
            lines.append(f"{fault} | {told.step} ({told.at_fault}) | {told.outcome} "
                         f"{told.answer[:70]!r}{before} | {record and record['status']} | "
                         f"{after}")  # fmt: skip
        return lines


def _read_ndjson(told: Told, response: httpx.Response) -> None:
    text, last = "", None
    for line in response.iter_lines():
        if not line.strip():
            continue
        chunk = json.loads(line)
        if chunk["type"] == "item":
            text += chunk.get("content", "")
            told.items += 1
        if chunk["type"] in ("end", "error"):
            last = chunk
    if last is None:
        told.ended("cut", text)
    elif last["type"] == "end":
        told.ended("end", text)
    else:
        told.ended("error", str(last.get("content", "")))


def _close(closed: ConnectionClosed) -> str:
    frame = closed.rcvd
    return f"closed {frame.code} {frame.reason!r}" if frame else "closed without a close frame"


def _refusal(response: httpx.Response) -> str:
    try:
        return str(response.json().get("message", ""))
    except ValueError:
        return ""  # not JSON: not a clear refusal


def _who(told: Told) -> str:
    return f"{told.step or 'message'} {told.text!r} ({told.execution_id})"


def _streams(workflow: dict) -> bool:
    trigger = next(n for n in workflow["nodes"] if n["type"].endswith("chatTrigger"))
    return trigger["parameters"].get("options", {}).get("responseMode") == "streaming"


def _remembers(workflow: dict) -> bool:
    return any(n["type"].endswith("memoryRedisChat") for n in workflow["nodes"])


def _question(workflow: dict) -> str:
    asks = next(n for n in workflow["nodes"] if n["type"].endswith(".chat"))
    return str(asks["parameters"]["message"])
