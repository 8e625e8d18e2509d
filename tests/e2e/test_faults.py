"""The fault matrix on one host: at each step of an execution's life (its streaming, its turn
in a session's line, a Chat node's wait, the resume after a reply), Redis paused (CLIENT PAUSE),
restarted (with its append-only file, as compose runs it, or empty), stopped (SIGSTOP); a
connection of each kind killed (CLIENT KILL); a worker or the api killed (SIGKILL) or stopped
(SIGSTOP). After every fault the checker (tests/e2e/checker.py) holds what each client was told
to the records and to memory, wants every execution finished (or waiting on purpose) within its
bound, and every session's next message answered.

Real processes (gunicorn + gevent api, Celery workers) on a Redis of the module's own
(tests/e2e/testbed.py). The cases of a fault that needs no process killed stage every step at
once (tests/e2e/scene.py), so one fault hits them all. `-s` prints what each client saw."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from core.liveness import lost_within
from tests.e2e import connections
from tests.e2e.checker import Checker, name
from tests.e2e.deployment import Deployment, fresh_ids
from tests.e2e.scene import Scene, session
from tests.e2e.testbed import LEASE_SECONDS, Testbed
from tests.waiting import wait_until
from tests.workflows import GREETING, example

FAULTS = ("redis paused", "redis restarted", "worker killed", "api killed")
KINDS = (*connections.KINDS, connections.EVERY_NORMAL, connections.EVERY_PUBSUB)
STOPPED_SECONDS = {"a worker": 10, "the api": 3, "redis": 3}


@pytest.fixture(scope="module")
def testbed(tmp_path_factory):
    bed = Testbed(tmp_path_factory.mktemp("faults-redis"))
    yield bed
    bed.close()


@pytest.fixture
def bed(testbed):
    """The testbed, whole again before each case (a failed case may have left it broken)."""
    testbed.heal()
    return testbed


def _inject(bed: Testbed, fault: str, execution_id: str | None) -> None:
    if fault == "redis paused":
        bed.pause_redis()
    elif fault == "redis restarted":
        bed.restart_redis()
    elif fault == "worker killed":
        bed.kill(bed.worker_of(str(execution_id)))
    elif fault == "api killed":
        bed.kill(bed.api())
    bed.heal()  # what a fault killed, an orchestrator starts again


def _report(bed: Testbed, checker: Checker, fault: str, at: float) -> None:
    """What each client saw (`-s` shows it), and which processes exited meanwhile."""
    processes = [*bed.workers, bed.api()]
    exited = {f"{p.name} {p.pid}": p.proc.poll() for p in processes if p.proc.poll() is not None}
    print("\n" + "\n".join(checker.report(fault, at)) + f"\nexited: {exited}")


def _check(bed: Testbed, checker: Checker, fault: str, at: float, cut_ok: bool = False) -> None:
    try:
        checker.check(cut_ok=cut_ok)
    finally:
        _report(bed, checker, fault, at)


def _hold(seconds: float) -> None:
    """The fault's length (a process or Redis stopped this long), not a wait for anything."""
    threading.Event().wait(seconds)


# --- one step, one fault that kills or restarts ---------------------------------------------
@pytest.mark.parametrize("fault", FAULTS)
def test_a_fault_while_an_answer_streams(bed, fault):
    checker = bed.checker()
    told = Scene(checker, bed.chat, bed.ask).streaming()
    at = time.monotonic()
    _inject(bed, fault, told.execution_id)
    _check(bed, checker, fault, at, cut_ok=fault == "api killed")
    record = bed.deploy.execution(str(told.execution_id))
    if fault in ("redis paused", "api killed"):
        assert record["status"] == "success"  # nothing of the execution's was lost
    if fault == "redis paused":  # and its stream waited it out, then got all of it
        assert told.outcome == "end"
    if fault == "worker killed":
        assert record["status"] == "crashed"
        assert told.outcome == "error" and "worker" in told.answer, told.answer


@pytest.mark.parametrize("fault", FAULTS)
def test_a_fault_while_a_message_waits_for_its_turn(bed, fault):
    checker = bed.checker()
    scene, line = Scene(checker, bed.chat, bed.ask), session("turn")
    first = scene.streaming(line)
    scene.queued(line)
    at = time.monotonic()
    _inject(bed, fault, first.execution_id)
    _check(bed, checker, fault, at, cut_ok=fault == "api killed")


@pytest.mark.parametrize("fault", FAULTS)
def test_a_fault_while_a_chat_node_waits(bed, fault):
    checker = bed.checker()
    conversation = Scene(checker, bed.chat, bed.ask).chat_node_waits()
    # A waiting execution holds no worker: the one that ran it to the wait is killed.
    at = time.monotonic()
    _inject(bed, fault, conversation.told.execution_id)
    if fault == "api killed":  # else a reply can go out on the socket before the client saw it cut
        conversation.see_the_socket_close()
    conversation.reply(f"my name is {name()}")
    _check(bed, checker, fault, at)
    assert conversation.told.outcome == "end"


@pytest.mark.parametrize("fault", [f for f in FAULTS if f != "worker killed"])
def test_a_fault_as_a_reply_resumes_a_wait(bed, fault):
    checker = bed.checker()
    scene = Scene(checker, bed.chat, bed.ask)
    conversation = scene.chat_node_waits()
    conversation.reply(f"my name is {name()}")
    at = time.monotonic()
    _inject(bed, fault, None)
    execution_id = str(conversation.told.execution_id)
    # The record is read once the client saw how its reply went: read while Redis is paused, it
    # can be answered before the api's reply, held by the same pause, is taken.
    conversation.told.wait(checker.bound)
    record = wait_until(lambda: (r := bed.deploy.execution(execution_id))
                        and r["status"] not in ("new", "running") and r,
                        checker.bound, "the resumed execution to settle")  # fmt: skip
    if record["status"] == "waiting":  # the reply was lost with the api before it was taken
        told = conversation.told
        assert told.outcome in ("cut", "error"), f"{told.outcome} {told.answer!r}, yet it waits"
        conversation.reply(told.text)  # the user sends it again
    _check(bed, checker, fault, at, cut_ok=fault == "api killed")


def test_a_worker_killed_as_a_reply_resumes_a_wait(bed):
    """The reply's task is taken by a worker that dies at once: the execution ends `crashed`
    within the lost-worker bound, the conversation's socket says so, and the session starts
    over."""
    checker = bed.checker()
    conversation = Scene(checker, bed.chat, bed.ask).chat_node_waits()
    for worker in bed.workers[1:]:
        bed.stop(worker.pid)  # only the first can take the reply
    conversation.reply(f"my name is {name()}")
    execution_id = str(conversation.told.execution_id)
    wait_until(lambda: bed.deploy.execution(execution_id)["status"] != "waiting",
               10, "the reply to resume it")  # fmt: skip
    at = time.monotonic()
    bed.kill(bed.workers[0])
    bed.heal()
    _check(bed, checker, "worker killed", at)
    assert bed.deploy.execution(execution_id)["status"] in ("success", "crashed")


def test_an_execution_no_worker_takes_is_ended_by_the_workers_reapers_though_nobody_streams_it(
    redis_url,
):
    """onReceived: the answer is given at once, so no stream checks on the execution. The
    workers' reapers end it once its queue time is over."""
    with Deployment.running(redis_url, MINI_N8N_QUEUE_TIMEOUT="2") as deploy:
        workflow = fresh_ids(example(GREETING))
        workflow["nodes"][0]["parameters"]["responseMode"] = "onReceived"
        deploy.activate(workflow)
        nowhere = deploy.start_api(MINI_N8N_TASK_QUEUE=f"{deploy.keys.prefix}nobody")
        path = workflow["nodes"][0]["parameters"]["path"]
        answer = httpx.post(f"{nowhere}/webhook/{path}", json={"name": "Ada"}, timeout=10)
        assert answer.json()["message"] == "Workflow was started"
        execution_id = answer.json()["executionId"]
        record = wait_until(
            lambda: (r := deploy.execution(execution_id))["status"] == "crashed" and r,
            2 + lost_within(LEASE_SECONDS) + 5,
            "a reaper to end it",
        )
        assert record["error"] == "No worker started this execution within 2 s."


# --- every step at once, faults that no process should die of -------------------------------
def _processes_up(bed: Testbed) -> None:
    gone = [p.name for p in [*bed.workers, bed.api()] if p.proc.poll() is not None]
    assert gone == [], f"exited: {gone}"


@pytest.mark.parametrize("kind", KINDS)
def test_a_killed_connection_of_each_kind_leaves_every_process_up_and_every_stream_true(bed, kind):
    checker = bed.checker()
    scene = Scene(checker, bed.chat, bed.ask)
    scene.stage()
    at = time.monotonic()
    wait_until(lambda: bed.kill_connections(kind), 10, f"a connection of {kind} to kill")
    scene.reply_to_the_waiting()
    _check(bed, checker, f"CLIENT KILL {kind}", at)
    _processes_up(bed)


def test_redis_restarted_empty_ends_what_was_in_flight_with_an_error_and_refuses_until_reimport(
    bed,
):
    checker = bed.checker()
    scene = Scene(checker, bed.chat, bed.ask)
    scene.stage()
    at = time.monotonic()
    bed.restart_redis(empty=True)
    checker.wiped()
    assert scene.waiting is not None
    scene.waiting.read_on()  # its execution is gone: the socket says so
    refused = checker.stream(bed.chat, session("refused"), f"my name is {name()}", "after")
    refused.wait(checker.bound)
    assert refused.outcome == "refused", (refused.outcome, refused.answer)
    bed.reimport()
    _check(bed, checker, "Redis restarted empty", at)
    in_flight = [t for t in checker.told if t.before_wipe]
    assert all(t.outcome == "error" for t in in_flight), [(t.step, t.outcome) for t in in_flight]
    _processes_up(bed)


@pytest.mark.parametrize("what", STOPPED_SECONDS)
def test_a_process_stopped_for_seconds_is_never_declared_lost(bed, what):
    """SIGSTOP, then SIGCONT: a process that is slow is not a process that is gone. Every
    execution in flight ends `success`, and its stream `end`."""
    checker = bed.checker()
    scene = Scene(checker, bed.chat, bed.ask)
    scene.stage()
    assert scene.streamed is not None
    streaming = scene.streamed
    pid = {
        "a worker": lambda: bed.worker_of(str(streaming.execution_id)).pid,
        "the api": lambda: bed.api().pid,
        "redis": lambda: bed.server.process.pid,  # type: ignore[union-attr]
    }[what]()
    at = time.monotonic()
    bed.stop(pid)
    _hold(STOPPED_SECONDS[what])
    bed.cont(pid)
    scene.reply_to_the_waiting()
    _check(bed, checker, f"SIGSTOP {what} {STOPPED_SECONDS[what]} s", at)
    assert [t.outcome for t in checker.told if t.step != "next message"] == ["end"] * 4
    _processes_up(bed)
