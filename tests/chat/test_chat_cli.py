"""`mini-n8n chat URL`: the terminal client, run as a real process against the deployment."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from tests.chat.support import ANSWER_84, chat_workflow
from tests.e2e.deployment import ROOT, chat_url

CHAT = [sys.executable, "-m", "mini_n8n.cli", "chat"]


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

    def wait_for(self, text: str, timeout: float = 30) -> str:
        with self._changed:
            found = self._changed.wait_for(
                lambda: text in self._data.decode(errors="replace"), timeout
            )
        assert found, f"{text!r} never came; got {self.snapshots[-1:]!r}"
        return self.snapshots[-1]


def test_the_terminal_client_streams_answers_and_keeps_one_session(chat_deployment):
    workflow = chat_deployment.activate(chat_workflow(delay_ms=80))
    url = chat_url(chat_deployment.base, workflow)
    proc = subprocess.Popen(
        [*CHAT, url, "--session", "cli-1"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out = Output(proc.stdout)
    proc.stdin.write(b"What is 40 + 44?\n")
    proc.stdin.flush()
    out.wait_for(f"{ANSWER_84}\n")
    partial = [s for s in out.snapshots if "bot> Based" in s and ANSWER_84 not in s]
    assert partial, out.snapshots  # some text was printed before the answer was complete
    proc.stdin.write(b"my name is Ada\n\nWhat is my name?\n")
    proc.stdin.close()
    assert proc.wait(30) == 0, proc.stderr.read()
    assert out.snapshots[-1] == (
        f"bot> {ANSWER_84}\nbot> Nice to meet you, Ada!\nbot> Your name is Ada.\n"
    )
    assert len(chat_deployment.chat_list("cli-1")) == 6

    again = subprocess.run(
        [*CHAT, url, "--session", "cli-1"], cwd=ROOT, input=b"", capture_output=True, timeout=30
    )
    assert again.returncode == 0
    assert again.stdout.decode().splitlines() == [
        "you> What is 40 + 44?",
        f"bot> {ANSWER_84}",
        "you> my name is Ada",
        "bot> Nice to meet you, Ada!",
        "you> What is my name?",
        "bot> Your name is Ada.",
    ]


def test_the_terminal_client_reports_a_refused_message_and_exits_non_zero(chat_deployment):
    url = f"{chat_deployment.base}/webhook/no-such-chat/chat"
    done = subprocess.run([*CHAT, url], cwd=ROOT, input=b"hello\n", capture_output=True, timeout=30)
    assert done.returncode == 1
    assert "error: 404 The requested webhook" in done.stderr.decode()
