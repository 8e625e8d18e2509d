"""Network faults between hosts: Redis, the api and the workers each in a network namespace of
their own (tests/faultlab/), a worker or the api cut off from Redis (for seconds, for a minute),
latency between the api and Redis and between a worker and Redis. Every step of an execution's life is in flight
when the fault comes (tests/e2e/scene.py); after it, the checker (tests/e2e/checker.py). `-s`
prints what each client saw."""

from __future__ import annotations

import threading
import time

import pytest

from tests.e2e.checker import Checker, name
from tests.e2e.scene import Scene, ask_then_answer, session, streaming_chat
from tests.e2e.testbed import BOUND, SETTINGS
from tests.faultlab.lab import Lab, Machine, SpreadDeployment

SECONDS, MINUTE = 5, 60
# Under latency every Redis step of a turn costs a round trip of 50-150 ms more: slower
# models, so that the scene's steps are still in flight together.
SLOW_TOKEN_MS, SLOW_RESUMED_TOKEN_MS = 350, 600


class Spread:
    """One deployment in the lab: its machines, its api, its workflows."""

    def __init__(self, lab: Lab, api: Machine, workers: list[Machine], slow: bool = False):
        self.lab, self.api = lab, api
        self.deploy = SpreadDeployment(lab, **SETTINGS)
        self.base = self.deploy.api_on(api)
        self.workers = [self.deploy.worker_on(w) for w in workers]
        delays = (SLOW_TOKEN_MS, SLOW_RESUMED_TOKEN_MS) if slow else ()
        self.chat = self.deploy.activate(streaming_chat(*delays[:1]))
        self.ask = self.deploy.activate(ask_then_answer(*delays[1:]))

    def scene(self) -> tuple[Checker, Scene]:
        checker = Checker(self.deploy, lambda: self.base, BOUND)
        return checker, Scene(checker, self.chat, self.ask)

    def processes_up(self) -> None:
        gone = [p.name for p in self.deploy.processes if p.proc.poll() is not None]
        assert gone == [], f"exited: {gone}"


@pytest.fixture(scope="module")
def spread(lab):
    """An api and two workers, each on a host of its own, reaching Redis directly."""
    deployment = Spread(lab, lab.machine("api"), [lab.machine("w1"), lab.machine("w2")])
    yield deployment
    deployment.deploy.stop()


@pytest.fixture(scope="module")
def slow(lab):
    """An api and a worker on hosts of their own, each reaching Redis through a delay proxy."""
    deployment = Spread(lab, lab.machine("api-slow", slow=True),
                        [lab.machine("w-slow", slow=True)], slow=True)  # fmt: skip
    yield deployment
    deployment.deploy.stop()


def _hold(seconds: float) -> None:
    """The fault's length, not a wait for anything."""
    threading.Event().wait(seconds)


def _check(spread: Spread, checker: Checker, fault: str, at: float) -> None:
    """The checker; then what each client saw (`-s` shows it), and which processes exited."""
    try:
        checker.check()
    finally:
        exited = {
            p.name: p.proc.poll() for p in spread.deploy.processes if p.proc.poll() is not None
        }
        print("\n" + "\n".join(checker.report(fault, at)) + f"\nexited: {exited}")


def _stream_answered_meanwhile(spread: Spread, checker: Checker, cut_off: Machine) -> None:
    """A message sent while a worker is cut off is answered by another worker."""
    told = checker.stream(spread.chat, session("meanwhile"), f"my name is {name()}", "meanwhile")
    told.wait(checker.bound)
    assert told.outcome == "end", (told.outcome, told.answer)
    assert spread.deploy.machine_of(str(told.execution_id)) is not cut_off


# The minute, and the checker's bounds after it, exceed the suite's 120 s per test when it fails.
@pytest.mark.timeout(240)
@pytest.mark.parametrize("seconds", [SECONDS, MINUTE], ids=["seconds", "a minute"])
def test_a_worker_cut_off_from_redis_leaves_every_stream_true(lab, spread, seconds):
    checker, scene = spread.scene()
    scene.stage()
    assert scene.streamed is not None
    machine = spread.deploy.machine_of(str(scene.streamed.execution_id))
    at = time.monotonic()
    with lab.partition(machine):
        # Redis answers a BRPOP that was waiting when the cut came within its 1 s timeout:
        # after that, the cut-off worker takes no task.
        _hold(2)
        if seconds == MINUTE:
            _stream_answered_meanwhile(spread, checker, machine)
        _hold(seconds - (time.monotonic() - at))
    scene.reply_to_the_waiting()
    _check(spread, checker, f"worker cut off from Redis {seconds} s", at)
    spread.processes_up()


def test_the_api_cut_off_from_redis_leaves_every_stream_true(lab, spread):
    checker, scene = spread.scene()
    scene.stage()
    at = time.monotonic()
    with lab.partition(spread.api):
        # A message that comes meanwhile is answered once the api is back, or refused.
        checker.stream(spread.chat, session("meanwhile"), f"my name is {name()}", "meanwhile",
                       wait=False)  # fmt: skip
        _hold(SECONDS)
    scene.reply_to_the_waiting()
    _check(spread, checker, f"api cut off from Redis {SECONDS} s", at)
    spread.processes_up()


def test_latency_between_every_process_and_redis_leaves_every_stream_true(slow):
    """The api and the worker each 50 +- 25 ms from Redis, each way."""
    machines = [slow.api, *(slow.deploy.machines[w.pid] for w in slow.workers)]
    checker, scene = slow.scene()
    at = time.monotonic()
    for machine in machines:
        machine.slow(True)
    try:
        scene.stage()
        scene.reply_to_the_waiting()
        _check(slow, checker, "latency api and worker to Redis", at)
    finally:
        for machine in machines:
            machine.slow(False)
    slow.processes_up()
