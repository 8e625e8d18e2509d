"""Operations endpoints: /healthz (process alive), /readyz (Redis reachable), /metrics."""

from __future__ import annotations

import logging

import redis
from flask import Blueprint, Response, jsonify
from prometheus_client import CONTENT_TYPE_LATEST

from api import metrics
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
    try:
        runtime().redis.ping()
    except redis.RedisError as err:
        # Where Redis lives is for the log, not for whoever asks (the answer is public).
        log.warning("readyz: Redis is unreachable: %s", err)
        return jsonify({"status": "unavailable", "error": "Redis is unreachable"}), 503
    return jsonify({"status": "ok"})


@bp.get("/metrics")
def prometheus_metrics():
    return Response(metrics.exposition(), content_type=CONTENT_TYPE_LATEST)
