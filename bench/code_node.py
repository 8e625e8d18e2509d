"""What one Code node run costs: its JavaScript on a warm isolate (the process pool a worker
lends: a process kept warm, a fresh isolate prepared while it was idle), on a new isolate in this
process (what an isolate costs to make: V8's, Luxon and the harness loaded), and on a new process
(the first run of a slot, or the run after one was killed).

    python bench/code_node.py [N]
"""

from __future__ import annotations

import statistics
import sys
import time

from core.code_task import CodeTask
from sandbox.isolate import Isolate
from sandbox.pool import ProcessPool

CODE = "return $input.all().map(i => ({json: {...i.json, seen: $now.toISODate()}}))"


def task() -> CodeTask:
    items = [{"json": {"n": n, "text": "x" * 100}} for n in range(10)]
    return CodeTask(
        code=CODE,
        mode="runOnceForAllItems",
        items=items,
        node_names=["Start"],
        execution={"id": "bench", "mode": "production"},
        workflow={"id": "w", "name": "bench", "active": True},
    )


def ms(samples: list[float]) -> str:
    samples = sorted(samples)
    p95 = samples[max(0, int(len(samples) * 0.95) - 1)]
    return f"median {statistics.median(samples) * 1000:.2f} ms, p95 {p95 * 1000:.2f} ms"


def warm_pool(n: int) -> list[float]:
    pool = ProcessPool(processes=1)
    try:
        pool.run(task())  # the process starts
        samples = []
        for _ in range(n):
            time.sleep(0.02)  # idle between messages: the next isolate is prepared meanwhile
            start = time.perf_counter()
            assert pool.run(task()).status == "ok"
            samples.append(time.perf_counter() - start)
        return samples
    finally:
        pool.close()


def new_isolate(n: int) -> tuple[list[float], list[float]]:
    Isolate(128).close()  # V8 itself, once per process
    made, ran = [], []
    for _ in range(n):
        start = time.perf_counter()
        isolate = Isolate(128)
        built = time.perf_counter()
        assert isolate.run(task(), 5.0).status == "ok"
        ran.append(time.perf_counter() - built)
        made.append(built - start)
        isolate.close()
    return made, ran


def new_process(n: int) -> list[float]:
    samples = []
    for _ in range(n):
        pool = ProcessPool(processes=1)
        start = time.perf_counter()
        assert pool.run(task()).status == "ok"
        samples.append(time.perf_counter() - start)
        pool.close()
    return samples


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    made, ran = new_isolate(n)
    print(f"eval on an isolate, in process:        {ms(ran)}")
    print(f"a new isolate (V8 context, Luxon, harness): {ms(made)}")
    print(f"a run on the pool's warm process:      {ms(warm_pool(n))}")
    print(f"a run on a new process (cold slot):    {ms(new_process(max(3, n // 10)))}")


if __name__ == "__main__":
    main()
