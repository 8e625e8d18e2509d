"""Operations endpoints: /healthz (process alive), /readyz (Redis reachable, and in queue mode the
relay's shared subscriber connection open), /metrics."""

from __future__ import annotations

import logging

import redis
from flask import Blueprint, Response, jsonify
from prometheus_client import CONTENT_TYPE_LATEST

from api import metrics
from api.relay import RelayError
from api.runtime import runtime

log = logging.getLogger("mini_n8n.api")

bp = Blueprint("ops", __name__)
bp.before_app_request(metrics.note_arrival)
bp.after_app_request(metrics.count_webhook)


@bp.get("/healthz")
def healthz():
    return jsonify({"status": "ok"})


@bp.get("/readyz")
def readyz():
    # Where Redis lives is for the log, not for whoever asks (the answer is public).
    api = runtime()
    try:
        api.redis.ping()
    except redis.RedisError as err:
        log.warning("readyz: Redis is unreachable: %s", err)
        return _unavailable("Redis is unreachable")
    if api.settings.executions_mode != "regular":
        try:
            api.launcher.relay.warm()  # opens it again if it was lost
        except RelayError as err:
            log.warning("readyz: the relay cannot subscribe: %s", err)
            return _unavailable("the api cannot subscribe to Redis")
    return jsonify({"status": "ok"})


def _unavailable(error: str):
    return jsonify({"status": "unavailable", "error": error}), 503


@bp.get("/metrics")
def prometheus_metrics():
    return Response(metrics.exposition(), content_type=CONTENT_TYPE_LATEST)
