"""gunicorn settings that belong to the product (`mini-n8n api` passes this module with -c)."""

from __future__ import annotations


def post_worker_init(worker) -> None:
    """On SIGTERM gunicorn stops accepting and waits for open requests up to its graceful
    timeout. Chat streams should finish in that time; editor push streams never finish on their
    own, so a watcher ends them as soon as the worker is told to stop."""
    import gevent

    def watch() -> None:
        while worker.alive:
            gevent.sleep(0.5)
        from api.push import end_all

        end_all("the api is shutting down")

    gevent.spawn(watch)
