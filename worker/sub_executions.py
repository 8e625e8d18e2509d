"""What a worker lends the engine for sub-workflows (engine/sub_workflow.py): the stored workflows
by id, and the start of a sub-workflow as an execution of its own when its caller does not wait
for it (an Execute Workflow node with `waitForSubWorkflow` off, n8n's doNotWaitToFinish).

Such an execution is recorded and queued as the api starts one (api/launcher.py): its record
(`new`, mode "integrated", as n8n names a sub-execution), the workflow version as a snapshot its
task names, its items in the task (or beside the record when large), and its task sent to any
worker. It has its own bounds and its own record, and its caller goes on at once.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from typing import Any

from core import jsontext
from core.clock import now_ms
from core.execution_record import ExecutionRecord
from core.executions import ExecutionStore
from core.redis_errors import error_text
from core.retry import retrying
from core.task import ITEMS_INLINE_BYTES, TaskPayload
from core.workflow_snapshots import WorkflowSnapshots
from core.workflow_store import WorkflowNotFound, WorkflowStore
from engine.workflow import Workflow, load_workflow

log = logging.getLogger("mini_n8n.worker")


class SubExecutions:
    def __init__(self, store: ExecutionStore, snapshots: WorkflowSnapshots,
                 send_task: Callable[[TaskPayload], None] | None):  # fmt: skip
        self.store = store
        self.workflows = WorkflowStore(store.client, store.keys, load_workflow)
        self.snapshots = snapshots
        self.send_task = send_task

    def find(self, workflow_id: str) -> Workflow:
        """The stored workflow `workflow_id`, parsed once per version; LookupError if none."""
        try:
            return retrying(lambda: self.workflows.load(workflow_id), "a sub-workflow", log)[1]
        except WorkflowNotFound:
            raise LookupError(workflow_id) from None

    def start(self, workflow: Workflow, trigger: str, items: list[dict[str, Any]],
              caller_id: str) -> str:  # fmt: skip
        """Record and queue `workflow` from `trigger` with `items`; the new execution's id."""
        if self.send_task is None:
            raise RuntimeError("this worker cannot queue executions")
        now = now_ms()
        record = ExecutionRecord(id=secrets.token_hex(8), workflow_id=workflow.id,
                                 workflow_name=workflow.name, mode="integrated", created_at=now,
                                 queued_at=now)  # fmt: skip
        text = jsontext.dumps_bytes(items)
        stored = text if len(text) > ITEMS_INLINE_BYTES else None
        payload = TaskPayload(record=record, start_node=trigger,
                              items=[] if stored is not None else items,
                              items_stored=stored is not None,
                              workflow_ref=self.snapshots.ref(workflow.raw))  # fmt: skip
        retrying(lambda: self.store.create(record, stored), "a sub-workflow's execution", log)
        try:
            self.send_task(payload)
        except Exception as err:
            self.store.fail_start(record, f"could not start: {error_text(err)}")
            raise
        log.info("execution %s started execution %s of workflow %s", caller_id, record.id,
                 workflow.id)  # fmt: skip
        return record.id
