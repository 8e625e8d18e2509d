"""A hub reply under faults, at its streaming step: a workflow agent (Redis Chat Memory,
streaming, a slow mock model) is answering when its worker is killed (SIGKILL) or stopped
(SIGSTOP, then SIGCONT), when Redis is paused (CLIENT PAUSE), loses every normal connection
(CLIENT KILL TYPE normal SKIPME yes) or restarts (with its append-only file, or empty).

After every fault (tests/hub/truth.py): every stream ended, what the tab was told is what the
conversation stores and what the workflow's memory holds, and the conversation's next message
is answered from the context its tab saw. Real processes (gunicorn + gevent api, Celery workers)
on a Redis of the module's own (tests/e2e/testbed.py), which these cases restart. `-s` prints
how each Redis fault ended the reply."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest

from tests.e2e import connections
from tests.e2e.checker import name
from tests.e2e.deployment import WORKER_LOSS
from tests.e2e.testbed import BOUND, Testbed
from tests.hub.client import HubClient, agent_model
from tests.hub.deployment import HubDeployment
from tests.hub.truth import Shown, Tab, check_truth
from tests.hub.workflows import support_bot

# The long answer streams in 26 tokens this far apart (6.5 s): still streaming when a fault
# hits after its second chunk, and past a 4 s pause.
TOKEN_DELAY_MS = 250
LONG = " ".join(f"word{i}" for i in range(24))  # answered "You said: word0 … word23"
STOPPED_SECONDS = 10  # under the testbed's lease (15 s): a silent worker keeps its executions
REDIS_FAULTS = ("CLIENT PAUSE", connections.EVERY_NORMAL, "restarted with its append-only file")


@pytest.fixture(scope="module")
def testbed(tmp_path_factory) -> Iterator[Testbed]:
    bed = Testbed(tmp_path_factory.mktemp("hub-faults-redis"), deployment=HubDeployment)
    bed.bot = bed.deploy.activate(support_bot(delay_ms=TOKEN_DELAY_MS))
    yield bed
    bed.close()


@pytest.fixture
def bed(testbed: Testbed) -> Testbed:
    """The testbed, whole again before each case (a failed case may have left it broken)."""
    testbed.heal()
    return testbed


@pytest.fixture
def tab(bed: Testbed) -> Iterator[Tab]:
    opened = Tab(HubClient(bed.base))
    yield opened
    opened.close()


class Conversation:
    """A conversation in which the bot learnt a name and is now streaming a long answer."""

    def __init__(self, bed: Testbed, tab: Tab):
        self.bed, self.tab = bed, tab
        self.session, self.name = str(uuid.uuid4()), name()
        self.model = agent_model(bed.bot)
        tab.send(self.session, f"my name is {self.name}", self.model)
        tab.end_of(self.session, 1, BOUND)
        tab.send(self.session, LONG, self.model, previous=self.last_message())
        tab.wait_for(lambda: len(tab.events(self.session, "chatHubStreamBegin")) == 2,
                     "the long answer", BOUND)  # fmt: skip
        begun = tab.events(self.session, "chatHubStreamBegin")[-1]["data"]
        self.execution_id, self.message_id = begun["executionId"], begun["messageId"]
        tab.wait_for(lambda: tab.chunks(self.session, self.message_id) >= 2,
                     "the long answer streaming", BOUND)  # fmt: skip

    def last_message(self) -> str:
        return max(self.tab.client.messages(self.session),
                   key=lambda m: (m["createdAt"], m["id"]))["id"]  # fmt: skip

    def answer(self) -> Shown:
        """Once the long answer is over: what its tab was shown of it (asserted true)."""
        self.tab.end_of(self.session, 2, BOUND)
        return check_truth(self.bed.deploy, self.tab, self.session, self.bed.bot)[self.message_id]

    def next_message_is_answered(self) -> dict:
        """ "What is my name?" answered from the name learnt; the record of its execution."""
        self.tab.send(self.session, "What is my name?", self.model, previous=self.last_message())
        self.tab.end_of(self.session, 3, BOUND)
        told = check_truth(self.bed.deploy, self.tab, self.session, self.bed.bot)
        begun = self.tab.events(self.session, "chatHubStreamBegin")[-1]["data"]
        assert told[begun["messageId"]].text == f"Your name is {self.name}."
        return self.bed.deploy.execution(begun["executionId"])


def _hold(seconds: float) -> None:
    """The fault's length (a process stopped this long), not a wait for anything."""
    threading.Event().wait(seconds)


def test_a_worker_killed_mid_reply_ends_it_in_error_keeping_the_text_shown_and_another_worker_answers_next(
    bed, tab
):
    talk = Conversation(bed, tab)
    victim = bed.worker_of(talk.execution_id)
    bed.kill(victim)
    bed.heal()  # a worker started in its place
    answer = talk.answer()
    # Told by the dead worker's closed connection (about 1.5 s), not by its lease running out.
    assert answer.status == "error" and answer.error == WORKER_LOSS[0], answer
    assert answer.text and f"You said: {LONG}".startswith(answer.text), answer
    assert bed.deploy.execution(talk.execution_id)["status"] == "crashed"
    record = talk.next_message_is_answered()
    assert record["status"] == "success" and record["worker"]["pid"] != victim.pid


def test_a_worker_stopped_mid_reply_for_seconds_is_never_declared_lost_and_its_reply_ends_whole(
    bed, tab
):
    talk = Conversation(bed, tab)
    pid = bed.worker_of(talk.execution_id).pid
    bed.stop(pid)
    _hold(STOPPED_SECONDS)
    bed.cont(pid)
    answer = talk.answer()
    assert answer.status == "success" and answer.text == f"You said: {LONG}", answer
    record = bed.deploy.execution(talk.execution_id)
    assert record["status"] == "success" and record["worker"]["pid"] == pid
    talk.next_message_is_answered()


@pytest.mark.parametrize("fault", REDIS_FAULTS)
def test_a_redis_fault_mid_reply_ends_it_as_the_conversation_and_memory_say(bed, tab, fault):
    """Success or error, whichever it was, the tab, the stored message and memory agree (a
    relay whose lease ran out during a pause or a restart goes on relaying: core/hub_runs.py)."""
    talk = Conversation(bed, tab)
    if fault == "CLIENT PAUSE":
        bed.pause_redis()
    elif fault == connections.EVERY_NORMAL:
        assert bed.kill_connections(fault)
    else:
        bed.restart_redis()
    answer = talk.answer()
    print(f"\n{fault}: {answer.status} {answer.error or ''}; push opened {tab.opens} times")
    talk.next_message_is_answered()


def test_redis_restarted_empty_mid_reply_says_the_conversation_is_gone_and_answers_once_the_workflows_are_back(
    bed, tab
):
    talk = Conversation(bed, tab)
    bed.restart_redis(empty=True)
    tab.end_of(talk.session, 2, BOUND)  # its push channel ended, and its catch-up was told:
    assert tab.gone == {talk.session: "Chat session not found"}
    assert tab.client.http.get(f"/conversations/{talk.session}").status_code == 404
    again = {"messageId": str(uuid.uuid4()), "sessionId": talk.session, "message": "hello",
             "model": talk.model, "previousMessageId": None, "credentials": {},
             "attachments": []}  # fmt: skip
    refused = tab.client.post("/conversations/send", again)
    assert refused.json() == {"code": 404, "message": "Workflow not found"}
    bed.reimport()
    bed.deploy.activate(bed.bot)
    tab.start_over(talk.session)
    tab.send(talk.session, "What is my name?", talk.model)
    tab.end_of(talk.session, 1, BOUND)
    told = check_truth(bed.deploy, tab, talk.session, bed.bot)
    assert [s.text for s in told.values()] == ["I don't know your name yet."]  # memory went too
