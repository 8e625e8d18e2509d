// Execution state, fed by push events and by execution records fetched over REST.
//
// The race this module exists for: the chat panel learns an execution's id from the response
// to its POST, but a fast execution's push events (chunks, node runs, even executionFinished)
// can arrive before that response. Events of an execution we do not know yet are kept in
// `early`, by execution id, and applied in order when `track(id)` makes it known.

import { FINISHED } from "./util.js";

const EARLY_EXECUTIONS = 500; // ids kept while waiting for their response; oldest dropped first

function newExecution(id, workflowId, mine) {
  return {
    id,
    workflowId,
    mine, // started by this tab: its events come over our push channel
    status: "new",
    finished: false,
    error: null,
    nodes: new Map(), // node name -> { runs: [{status, itemCount, executionTime, error}], running }
    listeners: [],
    record: null, // the final record, once fetched
    lastEventAt: Date.now(),
  };
}

function nodeState(exec, name) {
  let node = exec.nodes.get(name);
  if (!node) {
    node = { runs: [], running: false };
    exec.nodes.set(name, node);
  }
  return node;
}

export class Executions extends EventTarget {
  constructor() {
    super();
    this.byId = new Map();
    this.early = new Map();
    this.launching = 0; // chat messages sent whose execution id is not known yet
    this.caughtEarly = 0; // executions whose events arrived before their id (for diagnosis)
  }

  // --- push events ------------------------------------------------------------------------
  handle(event) {
    const id = event && event.data && event.data.executionId;
    if (!id) return;
    const exec = this.byId.get(id);
    if (exec) {
      this.apply(exec, event.type, event.data);
      return;
    }
    let kept = this.early.get(id);
    if (!kept) {
      if (this.early.size >= EARLY_EXECUTIONS) this.early.delete(this.early.keys().next().value);
      kept = [];
      this.early.set(id, kept);
    }
    kept.push(event);
    this.dispatchEvent(new CustomEvent("early", { detail: { id, type: event.type } }));
  }

  // Make an execution known (its id just arrived) and apply whatever came before it.
  track(id, { workflowId, mine = true, listener = null } = {}) {
    let exec = this.byId.get(id);
    if (!exec) {
      exec = newExecution(id, workflowId, mine);
      this.byId.set(id, exec);
    }
    if (listener) exec.listeners.push(listener);
    const kept = this.early.get(id) || [];
    this.early.delete(id);
    if (kept.length) this.caughtEarly += 1;
    for (const event of kept) this.apply(exec, event.type, event.data);
    this.changed(exec);
    return exec;
  }

  apply(exec, type, data) {
    exec.lastEventAt = Date.now();
    if (type === "executionStarted" && !exec.finished) {
      exec.status = "running";
    } else if (type === "nodeExecuteBefore") {
      nodeState(exec, data.nodeName).running = true;
    } else if (type === "nodeExecuteAfter") {
      const node = nodeState(exec, data.nodeName);
      node.running = false;
      node.runs[data.runIndex ?? node.runs.length] = {
        status: data.executionStatus,
        itemCount: data.itemCount,
        executionTime: data.executionTime,
        error: data.error,
      };
    } else if (type === "executionFinished") {
      this.finish(exec, data.status, data.error);
    }
    for (const listener of exec.listeners) listener(type, data, exec);
    this.changed(exec);
  }

  finish(exec, status, error) {
    exec.status = status;
    exec.error = error || null;
    exec.finished = true;
    for (const node of exec.nodes.values()) node.running = false;
  }

  // --- records ----------------------------------------------------------------------------
  // An execution seen through its record (the executions list, or a missed end).
  fromRecord(record) {
    const exec = this.byId.get(record.id) || newExecution(record.id, record.workflowId, false);
    this.byId.set(record.id, exec);
    this.absorb(exec, record);
    this.changed(exec);
    return exec;
  }

  // The record says the execution ended but no push told us (reconnect, lost worker, a stop
  // before it started): end it as if executionFinished had arrived.
  finishFromRecord(record) {
    const exec = this.byId.get(record.id);
    if (!exec || exec.finished || !FINISHED.has(record.status)) return;
    this.absorb(exec, record);
    const data = { executionId: record.id, status: record.status, error: record.error };
    this.apply(exec, "executionFinished", { ...data, fromRecord: true });
  }

  absorb(exec, record) {
    exec.workflowId = record.workflowId || exec.workflowId;
    for (const [name, runs] of Object.entries(record.runData || {})) {
      const node = nodeState(exec, name);
      node.runs = runs.map((run) => ({
        status: run.executionStatus,
        itemCount: countItems(run.data),
        executionTime: run.executionTime,
        error: run.error && (run.error.message || String(run.error)),
      }));
    }
    if (FINISHED.has(record.status)) {
      this.finish(exec, record.status, record.error);
      exec.record = record;
    } else if (!exec.finished) {
      exec.status = record.status;
    }
  }

  // The execution's record with run data, fetched once it has finished.
  async record(exec, api) {
    if (exec.record) return exec.record;
    const record = await api.execution(exec.id);
    if (FINISHED.has(record.status)) exec.record = record;
    return record;
  }

  // --- queries ----------------------------------------------------------------------------
  get(id) {
    return this.byId.get(id);
  }

  unfinished() {
    return [...this.byId.values()].filter((e) => !e.finished);
  }

  executing(workflowId) {
    if (this.launching > 0) return true;
    return this.unfinished().some((e) => e.mine && e.workflowId === workflowId);
  }

  earlyTypes(id) {
    return (this.early.get(id) || []).map((e) => e.type);
  }

  changed(exec) {
    this.dispatchEvent(new CustomEvent("change", { detail: exec }));
  }
}

export function countItems(data) {
  if (!data) return 0;
  let count = 0;
  for (const branches of Object.values(data)) {
    for (const branch of branches || []) count += (branch || []).length;
  }
  return count;
}
