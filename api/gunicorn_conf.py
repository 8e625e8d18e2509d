"""gunicorn settings that belong to the product (`mini-n8n api` passes this module with -c)."""

from __future__ import annotations

import os
import resource
import shutil
import tempfile

from gunicorn.glogging import Logger

from core import heap
from core.logs import dict_config
from core.settings import Settings

# gunicorn's own lines and the app's, through one handler in MINI_N8N_LOG_FORMAT, at
# MINI_N8N_LOG_LEVEL (core/logs.py). Set up in the master; the forked workers inherit it.
logconfig_dict = dict_config(Settings.from_env().log_format)


class _Logger(Logger):
    """gunicorn's logger without its access line: the api writes its own (api/access_log.py).
    A logconfig turns gunicorn's on, and the logger level alone only hides it: every request
    would still build its fields from the environ and both header lists. Off, the environ is
    no longer read once the app returned (api/responses.py lets a stream's go)."""

    access_log_enabled = False


logger_class = _Logger

# The head of a request, by gunicorn's own limits (its defaults, written out): a request line of
# at most 4094 bytes, at most 100 header fields of at most 8190 bytes each. The gevent worker
# gives each request's head `--keep-alive` seconds to arrive (MINI_N8N_KEEP_ALIVE, 5; the same
# time a connection may wait for its next request), then closes the connection: a client that
# trickles its headers holds a connection that long, nothing else. Bodies: api/bodies.py.
limit_request_line = 4094
limit_request_fields = 100
limit_request_field_size = 8190

# The metrics directory this api made at its start (None until then): removed at its end.
_metrics_dir: str | None = None


def on_starting(server) -> None:
    """Metrics from every worker process (api/metrics.py): prometheus-client's multiprocess mode
    writes each process's values to files in PROMETHEUS_MULTIPROC_DIR. A fresh directory per
    start, so no value of an earlier run comes back; set here in the master, before any worker
    is forked and imports prometheus-client. An inherited value is replaced for the same reason."""
    global _metrics_dir
    _metrics_dir = tempfile.mkdtemp(prefix="mini-n8n-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = _metrics_dir
    _raise_open_files_limit()


def _raise_open_files_limit() -> None:
    """Every open stream is a socket: lift the soft limit on open files (often 1024) to the hard
    one, for this master and the workers it forks, so 10,000 streams are not refused for want of
    file descriptors."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def child_exit(server, worker) -> None:
    """A worker process is gone: its gauges no longer count (its counters still do)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def on_exit(server) -> None:
    if _metrics_dir is not None:
        shutil.rmtree(_metrics_dir, ignore_errors=True)


def post_worker_init(worker) -> None:
    """On SIGTERM gunicorn stops accepting and waits for open requests up to its graceful
    timeout. Chat streams should finish in that time; editor push streams never finish on their
    own, so a watcher ends them as soon as the worker is told to stop."""
    import gevent

    # Each connection's greenlet would keep a copy of the frames that spawned it and a link to
    # its spawner (a debugging aid nothing here reads), for every open stream.
    gevent.config.track_greenlet_tree = False
    # Warm start: the app was loaded with the node modules (api/wsgi.py); its shared
    # clients are opened now, before the first request.
    worker.wsgi.extensions["mini_n8n"].warm_start()
    # Once the app returned, this server reads no environ (its access line is off, _Logger):
    # an open stream lets go of its own (api/responses.py).
    from api.responses import RELEASE_ENVIRON  # loaded with the app, after prometheus's setup

    worker.wsgi.config[RELEASE_ENVIRON] = True
    # A response's headers go out with its first body bytes, in one write (api/http_response.py).
    from api import http_response

    http_response.install()

    def watch() -> None:
        while worker.alive:
            gevent.sleep(0.5)
        from api import chat_socket
        from api.hub import fanout
        from api.push import end_all

        end_all("the api is shutting down")
        fanout.end_all("the api is shutting down")
        chat_socket.end_all("the api is restarting")

    gevent.spawn(watch)
    # Freed memory of a burst of stream starts goes back to the system (core/heap.py).
    gevent.spawn(heap.trim_forever, gevent.sleep)
    heap.settle()
