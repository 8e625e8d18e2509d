"""The CPU clock lent to executions (runtime/cpu_clock.py): per greenlet under gevent."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

GREENLET_CLOCK = textwrap.dedent(
    """
    from gevent import monkey; monkey.patch_all()
    import gevent, json
    from runtime import cpu_clock

    # The thread's CPU time, as the work done says: each greenlet adds what it computes.
    work = [0]
    cpu_clock.time.thread_time = lambda: work[0]
    clock = cpu_clock.task_clock()

    def busy(n):
        start = clock()
        for _ in range(20):
            work[0] += n; gevent.sleep(0)
        return clock() - start

    def idle():
        start = clock()
        for _ in range(20):
            gevent.sleep(0)
        return clock() - start

    jobs = [gevent.spawn(busy, 1_000_000), gevent.spawn(busy, 250_000), gevent.spawn(idle)]
    gevent.joinall(jobs)
    print(json.dumps([type(clock).__name__, *[job.value for job in jobs]]))
    """
)


def test_under_gevent_each_greenlet_is_charged_its_own_cpu_time_only():
    out = subprocess.run(
        [sys.executable, "-c", GREENLET_CLOCK], capture_output=True, text=True, timeout=60
    )
    kind, busy, lighter, idle = json.loads(out.stdout)
    assert kind == "GreenletClock"
    assert (busy, lighter, idle) == (20 * 1_000_000, 20 * 250_000, 0)
