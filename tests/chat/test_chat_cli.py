"""`mini-n8n chat URL`: the terminal client, run as a real process against the deployment, in
each response mode, with piped input and at a terminal (a pseudo-terminal as its stdin)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import termios
import threading
import uuid

import pytest

from mini_n8n.chat_client import socket_url
from tests.chat.conversation import ask_name_workflow
from tests.chat.support import ANSWER_84, chat_workflow
from tests.e2e.deployment import ROOT, chat_url

CHAT = [sys.executable, "-m", "mini_n8n.cli", "chat"]
QUESTIONS = ["What is 40 + 44?", "my name is Ada", "What is my name?"]
ANSWERS = [ANSWER_84, "Nice to meet you, Ada!", "Your name is Ada."]
ASK = "Hi! What is your name?"


class Output:
    """Reads a pipe as bytes arrive, keeping what had arrived after each read."""

    def __init__(self, pipe):
        self.snapshots: list[str] = []
        self._data = b""
        self._changed = threading.Condition()
        threading.Thread(target=self._read, args=(pipe.fileno(),), daemon=True).start()

    def _read(self, fd: int) -> None:
        while chunk := os.read(fd, 4096):
            with self._changed:
                self._data += chunk
                self.snapshots.append(self._data.decode(errors="replace"))
                self._changed.notify_all()

    @property
    def text(self) -> str:
        with self._changed:
            return self._data.decode(errors="replace")

    def wait_for(self, text: str, timeout: float = 30) -> str:
        """Waits until the output ends with `text`."""
        with self._changed:
            found = self._changed.wait_for(
                lambda: self._data.decode(errors="replace").endswith(text), timeout
            )
        assert found, f"{text!r} never came; got {self.snapshots[-1:]!r}"
        return self.snapshots[-1]


class Terminal:
    """The client with a pseudo-terminal as its stdin, so it behaves as at a prompt (echo off, so
    its stdout holds only what it printed)."""

    def __init__(self, url: str):
        master, slave = pty.openpty()
        attrs = termios.tcgetattr(slave)
        attrs[3] &= ~termios.ECHO
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
        self.master = master
        self.proc = subprocess.Popen(
            [*CHAT, url], cwd=ROOT, stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        os.close(slave)
        self.out = Output(self.proc.stdout)

    def type(self, line: str) -> None:
        os.write(self.master, f"{line}\n".encode())

    def ctrl_d(self) -> int:
        os.write(self.master, b"\x04")
        code = self.proc.wait(30)
        os.close(self.master)
        return code


def piped(url: str, lines: list[str]) -> subprocess.CompletedProcess:
    text = "".join(f"{line}\n" for line in lines)
    return subprocess.run(
        [*CHAT, url], cwd=ROOT, input=text.encode(), capture_output=True, timeout=60
    )


def answered_by_respond_to_webhook() -> dict:
    """The calculator chat answering through a Respond to Webhook node (responseNode mode)."""
    workflow = chat_workflow({"responseMode": "responseNode"})
    workflow["nodes"].append(
        {
            "id": str(uuid.uuid4()),
            "name": "Respond",
            "type": "n8n-nodes-base.respondToWebhook",
            "typeVersion": 1.1,
            "position": [700, 0],
            "parameters": {"respondWith": "firstIncomingItem", "options": {}},
        }
    )
    workflow["connections"]["AI Agent"] = {
        "main": [[{"node": "Respond", "type": "main", "index": 0}]]
    }
    return workflow


ONE_ANSWER_MODES = {
    "streaming": lambda: chat_workflow({"responseMode": "streaming"}),
    "lastNode": lambda: chat_workflow({"responseMode": "lastNode"}),
    "responseNode": answered_by_respond_to_webhook,
}


# --- one answer per message: streaming, lastNode, responseNode ---------------------------------
@pytest.mark.parametrize("mode", list(ONE_ANSWER_MODES))
def test_piped_lines_get_one_answer_each_and_share_one_session(chat_deployment, mode):
    workflow = chat_deployment.activate(ONE_ANSWER_MODES[mode]())
    done = piped(chat_url(chat_deployment.base, workflow), QUESTIONS)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == "".join(f"bot> {answer}\n" for answer in ANSWERS)


@pytest.mark.parametrize("mode", list(ONE_ANSWER_MODES))
def test_at_a_terminal_each_answer_comes_before_the_next_prompt(chat_deployment, mode):
    workflow = chat_deployment.activate(ONE_ANSWER_MODES[mode]())
    term = Terminal(chat_url(chat_deployment.base, workflow))
    term.out.wait_for("you> ")
    for question, answer in zip(QUESTIONS, ANSWERS, strict=True):
        term.type(question)
        term.out.wait_for(f"bot> {answer}\nyou> ")
    assert term.ctrl_d() == 0
    assert term.out.text == "you> " + "".join(f"bot> {answer}\nyou> " for answer in ANSWERS)


def test_a_streamed_answer_is_printed_as_it_arrives(chat_deployment):
    workflow = chat_deployment.activate(chat_workflow(delay_ms=80))
    proc = subprocess.Popen(
        [*CHAT, chat_url(chat_deployment.base, workflow)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out = Output(proc.stdout)
    proc.stdin.write(b"What is 40 + 44?\n")
    proc.stdin.close()
    out.wait_for(f"{ANSWER_84}\n")
    partial = [s for s in out.snapshots if "bot> Based" in s and ANSWER_84 not in s]
    assert partial, out.snapshots  # some text was printed before the answer was complete
    assert proc.wait(30) == 0, proc.stderr.read()


def test_with_session_the_earlier_conversation_is_shown_first(chat_deployment):
    workflow = chat_deployment.activate(chat_workflow())
    url = chat_url(chat_deployment.base, workflow)
    first = subprocess.run(
        [*CHAT, url, "--session", "cli-1"],
        cwd=ROOT,
        input="".join(f"{q}\n" for q in QUESTIONS).encode(),
        capture_output=True,
        timeout=60,
    )
    assert first.returncode == 0, first.stderr
    assert len(chat_deployment.chat_list("cli-1")) == 6
    again = subprocess.run(
        [*CHAT, url, "--session", "cli-1"], cwd=ROOT, input=b"", capture_output=True, timeout=30
    )
    assert again.returncode == 0
    assert again.stdout.decode().splitlines() == [
        line for q, a in zip(QUESTIONS, ANSWERS, strict=True) for line in (f"you> {q}", f"bot> {a}")
    ]


# --- responseNodes: a POST, then n8n's chat WebSocket ----------------------------------------
def test_piped_lines_hold_the_ask_my_name_conversation_over_the_chat_socket(chat_deployment):
    """Each turn: a POST starts the execution, the Chat node's question comes over the socket,
    the next piped line is the reply, and the socket's end ends the turn."""
    workflow = chat_deployment.activate(ask_name_workflow())
    done = piped(chat_url(chat_deployment.base, workflow), ["hello", "Ada", "hi again", "Grace"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == (
        f"bot> {ASK}\nbot> Nice to meet you, Ada!\nbot> {ASK}\nbot> Nice to meet you, Grace!\n"
    )
    executions = chat_deployment.redis.zrange(
        chat_deployment.keys.workflow_executions(workflow["id"]), 0, -1
    )
    records = [chat_deployment.execution(e) for e in executions]
    assert sorted(r["status"] for r in records) == ["success", "success"]
    replies = [r["runData"]["Ask name"][0]["data"]["main"][0][0]["json"] for r in records]
    assert sorted(reply["chatInput"] for reply in replies) == ["Ada", "Grace"]


def test_piped_hello_then_ada_is_one_conversation(chat_deployment):
    """`printf 'hello\nAda\n' | mini-n8n chat URL`: both lines go at once; the second is the
    conversation's reply, whenever its Chat node comes to wait for it."""
    workflow = chat_deployment.activate(ask_name_workflow())
    done = piped(chat_url(chat_deployment.base, workflow), ["hello", "Ada"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == f"bot> {ASK}\nbot> Nice to meet you, Ada!\n"
    executions = chat_deployment.redis.zrange(
        chat_deployment.keys.workflow_executions(workflow["id"]), 0, -1
    )
    assert [chat_deployment.execution(e)["status"] for e in executions] == ["success"]


def test_at_a_terminal_the_line_typed_after_the_question_is_the_reply(chat_deployment):
    workflow = chat_deployment.activate(ask_name_workflow())
    term = Terminal(chat_url(chat_deployment.base, workflow))
    term.out.wait_for("you> ")
    term.type("hello")
    term.out.wait_for(f"bot> {ASK}\nyou> ")  # the prompt: the execution waits for the reply
    term.type("Ada")
    term.out.wait_for("bot> Nice to meet you, Ada!\nyou> ")  # the turn ended: a new message
    assert term.ctrl_d() == 0
    assert term.out.text == f"you> bot> {ASK}\nyou> bot> Nice to meet you, Ada!\nyou> "


def test_piped_input_that_ends_while_the_chat_waits_ends_the_client(chat_deployment):
    workflow = chat_deployment.activate(ask_name_workflow())
    done = piped(chat_url(chat_deployment.base, workflow), ["hello"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == f"bot> {ASK}\n"
    assert "the chat waits for a reply, and the input has ended" in done.stderr.decode()


def test_the_terminal_client_reports_a_refused_message_and_exits_non_zero(chat_deployment):
    url = f"{chat_deployment.base}/webhook/no-such-chat/chat"
    done = subprocess.run([*CHAT, url], cwd=ROOT, input=b"hello\n", capture_output=True, timeout=30)
    assert done.returncode == 1
    assert "error: 404 The requested webhook" in done.stderr.decode()


def test_the_socket_url_is_on_the_chat_urls_origin_with_the_resume_token_and_no_login():
    """As @n8n/chat 1.37 builds it; the basic-auth login travels in a header instead."""
    url = socket_url("https://ada:pw@chat.example:8443/webhook/abc/chat", "s 1", "e1", "tok")
    assert (
        url == "wss://chat.example:8443/chat?sessionId=s+1&executionId=e1&isPublic=true&token=tok"
    )
    assert socket_url("http://localhost:5678/webhook/abc/chat", "s", "e", None) == (
        "ws://localhost:5678/chat?sessionId=s&executionId=e&isPublic=true"
    )
