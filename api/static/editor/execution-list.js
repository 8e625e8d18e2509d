// The executions of the open workflow: status, start time, duration, and a stop button for the
// ones still queued or running. Live status comes from push (for this tab's runs), the rest
// from REST; the list reloads (debounced) when an execution starts or ends.

import { FINISHED, el, formatDuration, formatTime } from "./util.js";

const RELOAD_DELAY_MS = 100; // a burst of messages reloads the list once
const FOREIGN_POLL_MS = 3000; // executions started elsewhere (webhooks, other tabs) have no push
const STATUS_LABELS = {
  new: "Queued",
  running: "Running",
  success: "Succeeded",
  error: "Failed",
  canceled: "Stopped",
  crashed: "Crashed",
};

export class ExecutionList {
  constructor(root, { api, executions, onSelect, onError }) {
    this.root = root;
    this.api = api;
    this.executions = executions;
    this.onSelect = onSelect;
    this.onError = onError;
    this.workflowId = null;
    this.records = [];
    this.selected = null;
    this.seen = new Map(); // execution id -> status last rendered
    this._timer = null;
    executions.addEventListener("change", (e) => this.onChange(e.detail));
  }

  async load(workflowId) {
    this.workflowId = workflowId;
    this.records = [];
    this.render();
    await this.reload();
  }

  async reload() {
    const workflowId = this.workflowId;
    if (!workflowId) return;
    try {
      const records = await this.api.executions(workflowId);
      if (workflowId === this.workflowId) {
        this.records = records;
        this.render();
      }
    } catch (err) {
      this.onError(err);
    }
  }

  scheduleReload() {
    clearTimeout(this._timer);
    this._timer = setTimeout(() => this.reload(), RELOAD_DELAY_MS);
  }

  onChange(exec) {
    if (!exec || exec.workflowId !== this.workflowId) return;
    const status = exec.status;
    if (this.seen.get(exec.id) === status) return;
    this.seen.set(exec.id, status);
    const row = this.root.querySelector(`[data-execution-id="${exec.id}"]`);
    if (row) this.fill(row, { ...this.recordOf(exec.id), status });
    if (!row || FINISHED.has(status)) this.scheduleReload(); // new row, or final times
  }

  recordOf(id) {
    return this.records.find((r) => r.id === id) || { id };
  }

  select(id) {
    this.selected = id;
    for (const row of this.root.children) {
      row.classList.toggle("selected", row.dataset.executionId === id);
    }
  }

  render() {
    const rows = this.records.map((record) => {
      const row = el("li", { class: "execution", "data-execution-id": record.id });
      row.addEventListener("click", () => this.onSelect(record.id));
      this.fill(row, this.live(record));
      return row;
    });
    if (!rows.length) rows.push(el("li", { class: "muted empty", text: "No executions yet." }));
    this.root.replaceChildren(...rows);
    this.select(this.selected);
    const foreign = this.records.some(
      (r) => !FINISHED.has(r.status) && !(this.executions.get(r.id) || {}).mine,
    );
    if (foreign) {
      clearTimeout(this._timer);
      this._timer = setTimeout(() => this.reload(), FOREIGN_POLL_MS);
    }
  }

  // A record merged with what push told us, which is newer for this tab's executions.
  live(record) {
    const exec = this.executions.get(record.id);
    if (exec && exec.mine && (exec.finished || !FINISHED.has(record.status))) {
      return { ...record, status: exec.status };
    }
    return record;
  }

  fill(row, record) {
    const status = record.status || "new";
    row.dataset.status = status;
    const stop = el("button", { class: "stop", type: "button", text: "Stop" });
    stop.addEventListener("click", (event) => {
      event.stopPropagation();
      this.stop(record.id, stop);
    });
    const when = [formatTime(record.startedAt || record.createdAt)];
    const took = formatDuration(record.startedAt, record.stoppedAt);
    if (took) when.push(took);
    const parts = [
      el(
        "div",
        { class: "summary" },
        el("span", { class: `status status-${status}`, text: STATUS_LABELS[status] || status }),
        el("span", { class: "id", text: ` #${record.id.slice(0, 8)}` }),
      ),
      el("div", { class: "when", text: when.join(" · ") }),
    ];
    if (!FINISHED.has(status)) parts.push(stop);
    row.replaceChildren(...parts);
  }

  async stop(id, button) {
    button.disabled = true;
    button.textContent = "Stopping…";
    try {
      const record = await this.api.stop(id);
      this.executions.finishFromRecord(record);
    } catch (err) {
      this.onError(err);
    }
    this.scheduleReload();
  }
}
