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
    from runtime.cpu_clock import task_clock
    clock = task_clock()

    def busy(n):
        start = clock()
        for _ in range(20):
            sum(range(n)); gevent.sleep(0)
        return clock() - start

    def idle():
        start = clock(); gevent.sleep(0.3); return clock() - start

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
    assert 2.5 < busy / lighter < 6  # four times the work, charged about four times the time
    assert idle < 0.01  # it slept while the others computed
