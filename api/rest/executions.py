"""Executions: list a workflow's, get one with its run data, stop one."""

from __future__ import annotations

from flask import jsonify, request

from api.errors import ApiError
from api.rest import bp
from api.runtime import runtime
from core.execution_record import ExecutionRecord
from core.stops import request_stop

MAX_LIST = 200
SUMMARY_DROP = ("runData",)  # the list shows status and times; run data comes with `get`


@bp.get("/executions")
def list_executions():
    workflow_id = request.args.get("workflowId")
    if not workflow_id:
        raise ApiError(400, 'The "workflowId" query parameter is required')
    limit = _limit(request.args.get("limit"))
    records = runtime().executions.list(workflow_id, limit)
    return jsonify({"data": [_summary(r.to_json()) for r in records]})


@bp.get("/executions/<execution_id>")
def get_execution(execution_id: str):
    return jsonify(_record(execution_id).to_json())


@bp.post("/executions/<execution_id>/stop")
def stop_execution(execution_id: str):
    record = request_stop(runtime().executions, execution_id)
    if record is None:
        raise ApiError(404, f"execution {execution_id} not found")
    return jsonify(record.to_json())


def _record(execution_id: str) -> ExecutionRecord:
    record = runtime().executions.get(execution_id)
    if record is None:
        raise ApiError(404, f"execution {execution_id} not found")
    return record


def _summary(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in SUMMARY_DROP}


def _limit(value: str | None) -> int:
    if value is None:
        return 50
    try:
        limit = int(value)
    except ValueError:
        raise ApiError(400, '"limit" must be an integer') from None
    if not 1 <= limit <= MAX_LIST:
        raise ApiError(400, f'"limit" must be between 1 and {MAX_LIST}')
    return limit
