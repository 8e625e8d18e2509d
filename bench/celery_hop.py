"""The floor under queue mode: a bare Celery hop (send_task -> a worker starts the task) over
Redis, or over another broker given by URL (RabbitMQ: amqp://...), with the same Celery settings
and gevent pool the real worker uses (heartbeats on, as `mini-n8n worker` runs), no workflow.

    python bench/celery_hop.py [N] [BROKER_URL]
"""

from __future__ import annotations

import subprocess
import sys
import time

import redis
from _common import redis_server, summary

from core.settings import Settings
from worker.celery_app import create_celery

WORKER = r"""
import sys, time
from gevent import monkey; monkey.patch_all()
import redis
from core.settings import Settings
from worker.celery_app import create_celery
app = create_celery(Settings(redis_url=sys.argv[1], broker_url=sys.argv[2], task_queue="hop"))
client = redis.Redis.from_url(sys.argv[1])

@app.task(name="hop")
def hop(sent):
    client.rpush("hop:latency", time.time() - sent)

app.worker_main(["worker", "--pool", "gevent", "--concurrency", "10", "--queues", "hop",
                 "--without-gossip", "--without-mingle", "--loglevel", "WARNING"])
"""


def main(n: int, broker: str | None) -> None:
    with redis_server() as url:
        broker = broker or url
        worker = subprocess.Popen([sys.executable, "-c", WORKER, url, broker])
        try:
            app = create_celery(Settings(redis_url=url, broker_url=broker, task_queue="hop"))
            producer = app.amqp.Producer(app.connection_for_write())
            client = redis.Redis.from_url(url)
            latencies = []
            for i in range(n + 20):
                app.send_task("hop", args=[time.time()], queue="hop", producer=producer)
                _, value = client.blpop(["hop:latency"], timeout=30)
                if i >= 20:  # the first ones warm the worker up
                    latencies.append(float(value))
            over = "Redis" if broker == url else broker.split(":", 1)[0]
            print(summary(f"Celery hop over {over} (gevent pool)", latencies))
        finally:
            worker.terminate()
            worker.wait()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300, sys.argv[2] if len(sys.argv) > 2 else None)
