// The editor page: wires the REST client, the push connection, the execution store and the
// views together. `window.editor` exposes the live state for debugging (and for the tests).

import { Api, KEY_STORAGE, takeKey } from "./api.js";
import { Canvas } from "./canvas.js";
import { ChatPanel } from "./chat.js";
import { ExecutionList } from "./execution-list.js";
import { Executions } from "./executions.js";
import { NodeView } from "./node-view.js";
import { Push } from "./push.js";
import { FINISHED, el, randomId } from "./util.js";

const POLL_MS = 3000; // how often unfinished executions are checked when push has been quiet
const QUIET_MS = 5000;
const CHAT_TRIGGER = "@n8n/n8n-nodes-langchain.chatTrigger";

const $ = (selector) => document.querySelector(selector);

const api = new Api(takeKey());
const pushRef = randomId();
const push = new Push(api.pushUrl(pushRef));
const executions = new Executions();
const state = { workflow: null, current: null };

const canvas = new Canvas($("#canvas"), { onNodeClick: openNode });
const nodeView = new NodeView($("#ndv"), { api, executions });
const chat = new ChatPanel($("#chat"), {
  api,
  push,
  pushRef,
  executions,
  onStarted: (id, workflowId) => state.workflow?.id === workflowId && showExecution(id),
});
const executionList = new ExecutionList($("#execution-list"), {
  api,
  executions,
  onSelect: (id) => selectExecution(id),
  onError: showError,
});

window.editor = { executions, push, pushRef, state };

// --- workflows --------------------------------------------------------------------------
async function loadWorkflows() {
  let workflows;
  try {
    workflows = await api.workflows();
  } catch (err) {
    if (err.status === 401 || err.status === 403) return askForKey(err);
    return showError(err);
  }
  push.connect();
  const list = $("#workflow-list");
  list.replaceChildren(
    ...workflows.map((w) =>
      el(
        "li",
        { "data-workflow-id": w.id },
        el("button", { type: "button", onclick: () => openWorkflow(w.id), text: w.name || w.id }),
        w.active ? el("span", { class: "badge active", text: "active" }) : null,
      ),
    ),
  );
  if (!workflows.length) list.append(el("li", { class: "muted", text: "No workflows stored." }));
  const wanted = new URLSearchParams(location.hash.slice(1)).get("workflow");
  const first = workflows.find((w) => w.id === wanted) || workflows[0];
  if (first) await openWorkflow(first.id);
}

async function openWorkflow(id) {
  let workflow;
  try {
    workflow = await api.workflow(id);
  } catch (err) {
    return showError(err);
  }
  state.workflow = workflow;
  state.current = null;
  history.replaceState(null, "", `#workflow=${encodeURIComponent(id)}`);
  for (const li of $("#workflow-list").children) {
    li.classList.toggle("selected", li.dataset.workflowId === id);
  }
  $("#workflow-title").textContent = workflow.name || id;
  renderActive();
  canvas.render(workflow);
  canvas.show(null);
  const canChat = (workflow.nodes || []).some((n) => n.type === CHAT_TRIGGER);
  $("#open-chat").disabled = !canChat;
  chat.forWorkflow(id);
  if (!canChat) chat.close();
  updateExecutionState();
  await executionList.load(id);
}

function renderActive() {
  const active = Boolean(state.workflow && state.workflow.active);
  const button = $("#toggle-active");
  button.hidden = !state.workflow;
  button.textContent = active ? "Deactivate" : "Activate";
  button.dataset.active = String(active);
}

async function toggleActive() {
  const workflow = state.workflow;
  try {
    const updated = await api.setActive(workflow.id, !workflow.active);
    workflow.active = updated.active;
    renderActive();
    const item = $(`#workflow-list [data-workflow-id="${CSS.escape(workflow.id)}"]`);
    item?.querySelector(".badge")?.remove();
    if (workflow.active) item?.append(el("span", { class: "badge active", text: "active" }));
    for (const warning of updated.warnings || []) showError(new Error(warning));
  } catch (err) {
    showError(err);
  }
}

// --- executions -------------------------------------------------------------------------
function showExecution(id) {
  state.current = id;
  executionList.select(id);
  canvas.show(executions.get(id) || null);
  updateExecutionState();
}

async function selectExecution(id) {
  const known = executions.get(id);
  if (!known || (!known.mine && !known.finished)) {
    try {
      executions.fromRecord(await api.execution(id));
    } catch (err) {
      return showError(err);
    }
  }
  showExecution(id);
}

function openNode(name) {
  const node = (state.workflow.nodes || []).find((n) => n.name === name);
  const exec = state.current ? executions.get(state.current) : null;
  nodeView.open(node, exec);
}

function updateExecutionState() {
  const box = $("#execution-state");
  const workflowId = state.workflow && state.workflow.id;
  const exec = state.current ? executions.get(state.current) : null;
  let text = "";
  let kind = "idle";
  if (workflowId && executions.executing(workflowId)) {
    [text, kind] = ["Executing…", "running"];
  } else if (exec && exec.finished) {
    const labels = { success: "Execution succeeded", canceled: "Execution stopped" };
    text = labels[exec.status] || `Execution ${exec.status}${exec.error ? `: ${exec.error}` : ""}`;
    kind = exec.status;
  } else if (exec) {
    [text, kind] = ["Waiting…", "waiting"]; // a run started elsewhere, not followed by push
  }
  box.textContent = text;
  box.dataset.state = kind;
}

let frame = 0;
executions.addEventListener("change", () => {
  // Many events can arrive in one frame; draw once.
  if (frame) return;
  frame = requestAnimationFrame(() => {
    frame = 0;
    if (state.current) canvas.show(executions.get(state.current) || null);
    updateExecutionState();
  });
});

// Push cannot tell us about an execution whose worker died, or events sent while we were
// reconnecting: ask the record of executions that have been quiet for a while.
async function checkQuiet(force = false) {
  for (const exec of executions.unfinished()) {
    if (!force && push.connected && Date.now() - exec.lastEventAt < QUIET_MS) continue;
    try {
      const record = await api.execution(exec.id);
      if (FINISHED.has(record.status)) executions.finishFromRecord(record);
      else exec.lastEventAt = Date.now();
    } catch (err) {
      if (err.status === 404) executions.finishFromRecord({ id: exec.id, status: "crashed" });
    }
  }
}

// --- page -------------------------------------------------------------------------------
function showError(err) {
  const box = $("#notice");
  box.textContent = err.message;
  box.hidden = false;
}

function askForKey(err) {
  $("#auth-message").textContent = err.message;
  $("#auth").hidden = false;
}

$("#auth-form").addEventListener("submit", (event) => {
  event.preventDefault();
  sessionStorage.setItem(KEY_STORAGE, $("#auth-key").value.trim());
  location.reload();
});
$("#notice").addEventListener("click", () => ($("#notice").hidden = true));
$("#open-chat").addEventListener("click", () => chat.open());
$("#toggle-active").addEventListener("click", toggleActive);
push.addEventListener("open", (e) => e.detail.reconnected && checkQuiet(true));
push.addEventListener("push", (e) => executions.handle(e.detail));
push.addEventListener("down", () => ($("#push-state").dataset.state = "down"));
push.addEventListener("open", () => ($("#push-state").dataset.state = "up"));
setInterval(() => checkQuiet(), POLL_MS);

loadWorkflows();
