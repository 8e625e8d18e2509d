"""An api worker told to stop (SIGTERM; `make up`'s Ctrl-C sends it): gunicorn stops accepting and
waits, up to its graceful timeout, until every open connection is done. Editor push streams and
chat sockets never end on their own: they are ended at once (their clients reconnect and catch
up, api/push.py, api/chat_socket.py). Chat answers still streaming are let finish, and the log
says what the api is waiting for, so whoever stopped it knows why it has not exited yet."""

from __future__ import annotations

import logging

log = logging.getLogger("mini_n8n.api")

POLL_SECONDS = 0.5  # how soon after the signal the endless streams are ended
SAY_EVERY_SECONDS = 5.0  # how often a stop still waiting says so


def watch(worker, rt, sleep) -> None:
    """Runs beside the worker (a greenlet, `sleep` being gevent's) until it is told to stop."""
    while worker.alive:
        sleep(POLL_SECONDS)
    from api import chat_socket, push
    from api.hub import fanout

    pushes = push.end_all("the api is shutting down")
    fanout.end_all("the api is shutting down")  # the Chat Hub's push streams
    sockets = chat_socket.end_all("the api is restarting")
    log.info(
        "stopping: ended %s and %s; open chat answers get up to %s s to finish",
        _count(pushes, "editor push stream"),
        _count(sockets, "chat socket"),
        worker.cfg.graceful_timeout,
    )
    while True:
        sleep(SAY_EVERY_SECONDS)
        streams = rt.open_streams()
        if streams:
            log.info("stopping: waiting for %s to finish", _count(streams, "chat answer"))


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
