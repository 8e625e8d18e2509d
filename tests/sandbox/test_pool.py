"""The Code node's JavaScript in processes of their own (sandbox/pool.py), as a worker runs it:
real child processes, each limit asserted by the outcome it ends with (never by a duration),
and under gevent the worker's other greenlets go on while a Code node spins."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from core.code_task import CodeTask
from sandbox.pool import ProcessPool
from sandbox.server import ORPHANED_EXIT

ROOT = Path(__file__).resolve().parents[2]


def task(code: str, mode: str = "runOnceForAllItems") -> CodeTask:
    return CodeTask(
        code=code,
        mode=mode,
        items=[{"json": {"n": 1}}],
        node_names=["Start"],
        execution={"id": "e1", "mode": "production"},
        workflow={"id": "w1", "name": "W", "active": True},
    )


@pytest.fixture
def pool():
    pool = ProcessPool(timeout_seconds=1.0, memory_mb=64, processes=2)
    yield pool
    pool.close()


@pytest.fixture
def roomy_pool():
    """A pool whose time limit a task that ends cannot meet, however busy the machine: for the
    tests of what an ending task gives (the 1 s one is for the tests of what never ends)."""
    pool = ProcessPool(timeout_seconds=120.0, memory_mb=64, processes=2)
    yield pool
    pool.close()


def test_a_task_runs_in_a_process_and_its_process_is_kept_for_the_next(roomy_pool):
    pool = roomy_pool
    first = pool.run(task("console.log($json.n); return [{json: {twice: $json.n * 2}}]"))
    second = pool.run(task("return [{json: {again: true}}]"))
    assert (first.status, first.result, first.logs) == ("ok", [{"json": {"twice": 2}}], ["1"])
    assert (second.status, second.result) == ("ok", [{"json": {"again": True}}])
    assert (pool.runs, pool.restarts) == (2, 0)


def test_a_loop_that_never_ends_is_stopped_and_the_next_task_gets_a_new_process(pool):
    stopped = pool.run(task("while (true) {}"))
    after = pool.run(task("return [{json: {ok: 1}}]"))
    assert stopped.status == "timeout"
    assert stopped.error == {
        "message": "Task execution timed out after 1 second (MINI_N8N_CODE_TIMEOUT)"
    }
    assert stopped.cpu_seconds > 0  # its process's CPU, read from /proc, charged to the run
    assert (after.status, pool.restarts) == ("ok", 1)


def test_a_timer_that_spins_while_the_script_awaits_is_stopped_by_killing_its_process(pool):
    spin = "setTimeout(() => { while (true) {} }, 0); await new Promise((r) => setTimeout(r, 20));"
    stopped = pool.run(task(spin + " return []"))  # the spin's turn comes before the return's
    assert (stopped.status, pool.restarts) == ("timeout", 1)
    assert pool.run(task("return []")).status == "ok"


def test_a_timer_left_by_a_script_that_returned_never_holds_its_process(pool):
    """The answer and the timer race (the timer is due 1 ms later): when the timer runs first,
    the run spins until its time limit and its process is killed; when the answer is read first,
    the isolate is closed with the timer never run and the process goes on. Either way the next
    task is answered; a process never stays busy behind an answer it gave."""
    seen = set()
    for _ in range(4):
        restarts = pool.restarts
        outcome = pool.run(task("setTimeout(() => { while (true) {} }, 0); return []"))
        expected = {"timeout": 1, "ok": 0}[outcome.status]
        assert pool.restarts - restarts == expected, outcome
        assert pool.run(task("return [{json: {next: 1}}]")).status == "ok"
        seen.add(outcome.status)
    print(f"\nthe first to be read, of 4: {sorted(seen)}")


@pytest.mark.parametrize(
    "code",
    [
        # V8's heap past its limit: the isolate's own exception
        "const all = []; for (;;) all.push({n: Math.random()})",
        # a gigabyte outside V8's heap: the process's memory, watched from outside
        "const big = new Uint8Array(2 ** 30).fill(1); return []",
        # an allocation V8 dies of (a fatal error that ends the process)
        "return [{json: {n: new Array(2 ** 28).fill(1).length}}]",
    ],
    ids=["heap", "array-buffer", "fatal"],
)
def test_allocating_a_gigabyte_is_stopped_as_out_of_memory(code):
    pool = ProcessPool(timeout_seconds=60.0, memory_mb=64, processes=1)  # memory ends it first
    try:
        outcome = pool.run(task(code))
        assert outcome.status == "memory"
        assert outcome.error["message"].startswith("Node ran out of memory")
        assert pool.run(task("return []")).status == "ok"
    finally:
        pool.close()


def test_a_stop_ends_the_run_and_kills_its_process():
    pool = ProcessPool(timeout_seconds=60.0, memory_mb=64, processes=1)
    cancel = threading.Event()
    try:
        assert pool.run(task("return []")).status == "ok"  # started: the stop meets the run
        threading.Timer(0.2, cancel.set).start()
        outcome = pool.run(task("while (true) {}"), cancel)
        assert (outcome.status, pool.restarts) == ("canceled", 1)
    finally:
        pool.close()


def test_the_time_cap_lowers_the_time_limit(pool):
    outcome = pool.run(task("while (true) {}"), time_cap=0.2)
    assert outcome.error == {
        "message": "Task execution timed out after 0.2 seconds (MINI_N8N_CODE_TIMEOUT)"
    }


def test_no_more_processes_than_slots_run_at_once():
    """Three spinning tasks on two slots: two processes ever, the third task waits for one."""
    pool = ProcessPool(timeout_seconds=0.5, memory_mb=64, processes=2)
    try:
        outcomes = []
        threads = [
            threading.Thread(target=lambda: outcomes.append(pool.run(task("while (true) {}"))))
            for _ in range(3)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert [o.status for o in outcomes] == ["timeout"] * 3
        assert (pool.restarts, pool.most_at_once) == (3, 2)
    finally:
        pool.close()


def test_a_process_that_died_while_idle_is_replaced(pool):
    assert pool.run(task("return []")).status == "ok"
    idle = pool._idle.queue[0]
    idle.proc.kill()
    idle.proc.wait()
    assert pool.run(task("return [{json: {fresh: true}}]")).result == [{"json": {"fresh": True}}]


def test_a_child_whose_parent_is_not_the_one_that_started_it_exits_at_once():
    """The race PR_SET_PDEATHSIG cannot see: the parent died before the child asked, and the
    child was handed to another (here: it names pid 1, which is not its parent)."""
    child = subprocess.run(
        [sys.executable, "-m", "sandbox.server", "--parent-pid", "1"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.PIPE,  # held open: an idle child would wait on it
        capture_output=True,
        timeout=60,
    )
    assert (child.returncode, child.stdout) == (ORPHANED_EXIT, b"")


def test_a_warm_process_outlives_the_thread_that_first_needed_it(roomy_pool):
    """A child is killed when the thread that forked it ends (PR_SET_PDEATHSIG): a caller's
    short-lived thread does not fork it, the pool's lasting spawner thread does."""
    pool = roomy_pool
    first = []
    caller = threading.Thread(target=lambda: first.append(pool.run(task("return []"))))
    caller.start()
    caller.join()
    (warm,) = pool._idle.queue
    again = pool.run(task("return [{json: {again: true}}]"))
    assert (first[0].status, again.result) == ("ok", [{"json": {"again": True}}])
    assert (pool.restarts, warm.alive()) == (0, True)


def test_the_child_gets_none_of_the_workers_secrets(monkeypatch):
    monkeypatch.setenv("MINI_N8N_API_KEY", "secret-key")
    monkeypatch.setenv("REDIS_URL", "redis://:password@example:6379/0")
    from sandbox.process import _child_environment

    assert "MINI_N8N_API_KEY" not in _child_environment()
    assert "REDIS_URL" not in _child_environment()


GEVENT_SCRIPT = textwrap.dedent(
    """
    from gevent import monkey; monkey.patch_all()
    import json
    import gevent
    from core.code_task import CodeTask
    from runtime.spawn import spawn
    from sandbox.pool import ProcessPool

    import threading
    pool = ProcessPool(timeout_seconds=60.0, memory_mb=64, processes=2, spawn=spawn)
    ticks = []

    def other_work():  # another chat's greenlet on the same worker
        while True:
            ticks.append(1)
            gevent.sleep(0.01)

    def task(code):
        return CodeTask(code=code, mode="runOnceForAllItems", items=[{"json": {}}],
                        node_names=[], execution={"id": "e", "mode": "production"},
                        workflow={"id": "w", "name": "W", "active": True})

    gevent.spawn(other_work)
    warm = [gevent.spawn(pool.run, task("return []")) for _ in range(2)]  # both slots started
    gevent.joinall(warm)
    before = len(ticks)
    stop = threading.Event()
    spinning = gevent.spawn(pool.run, task("while (true) {}"), stop)
    answered = gevent.spawn(pool.run, task("return [{json: {meanwhile: true}}]"))
    answered.join()
    still_spinning = not spinning.ready()
    during = len(ticks) - before
    stop.set()  # the execution is stopped: its process is killed
    spinning.join()
    pool.close()
    print(json.dumps({"spun": spinning.value.status, "meanwhile": answered.value.result,
                      "still_spinning": still_spinning, "ticks": during}))
    """
)


def test_under_gevent_a_spinning_code_node_leaves_the_workers_greenlets_running():
    done = subprocess.run(
        [sys.executable, "-c", GEVENT_SCRIPT],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["spun"] == "canceled"
    # A second Code node was answered while the first still spun, and the worker's other
    # greenlet kept its turns all along (a blocked hub would give it none until the end).
    assert result["meanwhile"] == [{"json": {"meanwhile": True}}]
    assert result["still_spinning"] is True
    assert result["ticks"] > 0
