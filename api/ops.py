"""Operations endpoints: /healthz (process alive), /readyz (Redis reachable), /metrics."""

from __future__ import annotations

import redis
from flask import Blueprint, Response, jsonify
from prometheus_client import CONTENT_TYPE_LATEST, Gauge, generate_latest

from api.runtime import runtime

bp = Blueprint("ops", __name__)

OPEN_STREAMS = Gauge("mini_n8n_open_streams", "Executions this api process is relaying now")


@bp.get("/healthz")
def healthz():
    return jsonify({"status": "ok"})


@bp.get("/readyz")
def readyz():
    try:
        runtime().redis.ping()
    except redis.RedisError as err:
        return jsonify({"status": "unavailable", "error": f"Redis: {err}"}), 503
    return jsonify({"status": "ok"})


@bp.get("/metrics")
def metrics():
    rt = runtime()
    OPEN_STREAMS.set(rt._relay.open_streams() if rt._relay else 0)
    return Response(generate_latest(), content_type=CONTENT_TYPE_LATEST)
