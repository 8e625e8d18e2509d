// The editor page: wires the REST client, the push connection, the execution store and the
// views together, and holds the workflow being edited (a WorkflowDoc, with undo/redo).
// `window.editor` exposes the live state for debugging (and for the tests).

import { Api } from "./api.js";
import { Canvas } from "./canvas.js";
import { ChatPanel } from "./chat.js";
import { NodeCreator } from "./creator.js";
import { ExecutionList } from "./execution-list.js";
import { Executions } from "./executions.js";
import { NodeTypes, slotLabel } from "./node-types.js";
import { nodePanel } from "./node-panel.js";
import { NodeView } from "./node-view.js";
import { Push } from "./push.js";
import { SignIn } from "./signin.js";
import { UsersPage } from "./users.js";
import { FINISHED, el, randomId } from "./util.js";
import { Lifecycle } from "./lifecycle.js";
import { WorkflowDoc } from "./workflow-doc.js";

const POLL_MS = 3000; // how often unfinished executions are checked when push has been quiet
const QUIET_MS = 5000;
const NOTICE_MS = 5000; // an info notice is read by then; an error stays until dismissed
// Writes that are not the user's action: they leave notices as they are.
const NOT_ACTIONS = new Set(["/expressions/preview", "/login", "/logout"]);
const CHAT_TRIGGER = "@n8n/n8n-nodes-langchain.chatTrigger";
const REFIT = new Set(["open", "add", "delete", "undo", "redo"]);

const $ = (selector) => document.querySelector(selector);

const api = new Api();
const pushRef = randomId();
const push = new Push(api.pushUrl(pushRef));
const executions = new Executions();
const state = {
  doc: null,
  current: null,
  types: new NodeTypes(),
  credentials: [],
  issues: new Map(), // node name -> the engine's validation message
  opening: 0, // bumped by every open: a slower, older open does not replace a newer one
  get workflow() {
    return this.doc ? this.doc.data : null;
  },
};

const canvas = new Canvas($("#canvas"), {
  onNodeClick: openNode,
  onSlotClick: addToSlot,
  onMove: (name, position) => state.doc.moveNode(name, position),
  onConnect: connect,
});
const creator = new NodeCreator($("#creator"));
const nodeView = new NodeView($("#ndv"), {
  api,
  executions,
  form: (node) => nodePanel(node, { api, state, notify, close: () => nodeView.dialog.close() }),
});
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
const lifecycle = new Lifecycle({
  api,
  state,
  showError,
  notify,
  setDoc,
  listWorkflows,
  openWorkflow,
  opened: (id) => {
    chat.forWorkflow(id);
    executionList.load(id);
  },
});

const signin = new SignIn({ api, showError, onSignedIn: () => booted || boot() });
const users = new UsersPage($("#users-dialog"), { api, notify });

window.editor = { executions, push, pushRef, state };


async function signOut() {
  if (!lifecycle.confirmDiscard()) return;
  try {
    await api.signOut();
  } catch (err) {
    return showError(err);
  }
  if (state.doc) state.doc.dirty = false; // discarded above: leave without asking again
  location.reload(); // a fresh page, which finds itself signed out
}

// --- workflows --------------------------------------------------------------------------
let booted = false;

async function boot() {
  if (!(await signin.check())) return;
  let workflows;
  try {
    const [list, types, credentials] = await Promise.all([
      api.workflows(),
      api.nodeTypes(),
      // Without the credential list the editor still works; the picker says why it is empty.
      api.credentials().catch((err) => {
        if (err.status === 401 || err.status === 403) throw err;
        showError(err);
        return [];
      }),
    ]);
    workflows = list;
    state.types = new NodeTypes(types);
    state.credentials = credentials;
  } catch (err) {
    return showError(err); // a 401 has put up the sign-in page: signing in boots again
  }
  booted = true;
  canvas.setTypes(state.types);
  creator.setTypes(state.types);
  push.connect();
  renderList(workflows);
  const wanted = new URLSearchParams(location.hash.slice(1)).get("workflow");
  const first = workflows.find((w) => w.id === wanted) || workflows[0];
  if (first) await openWorkflow(first.id);
  else setDoc(lifecycle.blank());
}

async function listWorkflows() {
  try {
    renderList(await api.workflows());
  } catch (err) {
    showError(err);
  }
}

function renderList(workflows) {
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
  markListed();
}

function markListed() {
  const id = state.workflow?.id;
  for (const li of $("#workflow-list").children) {
    li.classList.toggle("selected", Boolean(id) && li.dataset.workflowId === id);
  }
}

async function openWorkflow(id, { force = false } = {}) {
  if (!force && !lifecycle.confirmDiscard()) return;
  const ticket = ++state.opening;
  let workflow;
  try {
    workflow = await api.workflow(id);
  } catch (err) {
    return showError(err);
  }
  if (ticket !== state.opening) return; // the user opened or started another one meanwhile
  setDoc(workflow);
  await executionList.load(id);
}

// Start editing `workflow` (a stored one, or a blank one without an id).
function setDoc(workflow) {
  const previous = state.workflow?.id;
  state.opening += 1;
  state.doc = new WorkflowDoc(workflow);
  state.doc.addEventListener("change", (e) => onDocChange(e.detail.kind, e.detail));
  state.current = null;
  state.issues = new Map();
  lifecycle.hideConflict();
  nodeView.dialog.open && nodeView.dialog.close();
  const id = workflow.id;
  history.replaceState(null, "", id ? `#workflow=${encodeURIComponent(id)}` : location.pathname);
  if (id !== previous || !id) chat.forWorkflow(id || null);
  onDocChange("open");
  canvas.show(null);
  if (!id) executionList.load(null);
}

function onDocChange(kind, detail = {}) {
  const workflow = state.workflow;
  if (kind === "saved") state.issues = new Map();
  canvas.render(workflow, { fit: REFIT.has(kind), reveal: kind === "move" ? detail.name : null });
  canvas.show(state.current ? executions.get(state.current) || null : null);
  canvas.showIssues(state.issues);
  const nameInput = $("#workflow-name");
  if (document.activeElement !== nameInput) nameInput.value = workflow.name || "";
  document.body.dataset.dirty = String(state.doc.dirty);
  $("#dirty").hidden = !state.doc.dirty;
  $("#undo").disabled = !state.doc.undoStack.length;
  $("#redo").disabled = !state.doc.redoStack.length;
  const canChat = (workflow.nodes || []).some((n) => n.type === CHAT_TRIGGER);
  $("#open-chat").disabled = !canChat || !workflow.id;
  if (!canChat) chat.close();
  $("#delete-workflow").disabled = !workflow.id;
  renderActive();
  markListed();
  if (nodeView.dialog.open && nodeView.node) {
    const name = kind === "rename" && detail.from === nodeView.node.name ? detail.to : nodeView.node.name;
    nodeView.refreshForm(state.doc.node(name));
  }
  updateExecutionState();
}

function renderActive() {
  const workflow = state.workflow;
  const active = Boolean(workflow && workflow.active);
  const button = $("#toggle-active");
  button.hidden = !workflow || !workflow.id;
  button.textContent = active ? "Deactivate" : "Activate";
  button.dataset.active = String(active);
}

// --- editing ----------------------------------------------------------------------------
function addNode() {
  creator.open({ onPick: (type) => state.doc.addNode(type, canvas.placeFor(null)) });
}

function addToSlot(nodeName, slotType) {
  if (slotIsFull(nodeName, slotType)) return;
  creator.open({
    slot: slotType,
    label: slotLabel(state.types, state.doc.node(nodeName).type, slotType),
    onPick: (type) =>
      state.doc.addNode(type, canvas.placeFor(nodeName, slotType), { type: slotType, node: nodeName }),
  });
}

// A slot takes as many sub-nodes as its declaration says (the Agent: one model, one memory).
function slotIsFull(nodeName, slotType) {
  const node = state.doc.node(nodeName);
  const slot = state.types.slots(node.type).find((s) => s.type === slotType);
  const max = slot ? slot.maxConnections : 0;
  if (max === undefined || state.doc.count(nodeName, slotType) < max) return false;
  const label = slotLabel(state.types, node.type, slotType).toLowerCase();
  notify(`"${nodeName}" takes only ${max} ${label}: remove the connected one first.`);
  return true;
}

// A connection dragged on the canvas: main output to main input, or a sub-node to a slot.
function connect(source, type, target, supplied = "main") {
  const node = state.doc.node(target);
  if (type === "main" && !state.types.hasMainInput(node.type)) {
    notify(`"${target}" has no input to connect to.`);
    return;
  }
  if (type !== supplied) {
    const label = slotLabel(state.types, node.type, type).toLowerCase();
    notify(`"${source}" cannot be the ${label} of "${target}".`);
    return;
  }
  if (type !== "main" && slotIsFull(target, type)) return;
  state.doc.connect(source, type, target);
}

function deleteSelection() {
  const selection = canvas.selection;
  if (!selection) return;
  if (selection.kind === "node") state.doc.removeNodes([selection.name]);
  else state.doc.disconnect(selection.edge);
}

// --- activation -------------------------------------------------------------------------
async function toggleActive() {
  const workflow = state.workflow;
  if (!workflow.active && state.doc.dirty && !(await lifecycle.save())) return;
  try {
    const updated = await api.setActive(workflow.id, !workflow.active);
    state.doc.markSaved(updated);
    for (const warning of updated.warnings || []) notify(warning);
    await listWorkflows();
  } catch (err) {
    showIssue(err);
  }
}

// The engine's validation error names a node: show it there, and say it.
function showIssue(err) {
  const node = err.body && err.body.node;
  if (node && state.doc.node(node)) {
    state.issues = new Map([[node, err.message]]);
    canvas.showIssues(state.issues);
  }
  showError(err);
}
lifecycle.showIssue = showIssue;

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
  const node = state.doc.node(name);
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
  notify(err.message, "error");
}

// A notice says what just happened: an info one goes after NOTICE_MS, an error stays until it is
// dismissed; both go when the next action the user asked for succeeds (a save, an activation...),
// so an old message is never read as news about a later action.
let noticeTimer = 0;

function notify(message, kind = "info") {
  clearTimeout(noticeTimer);
  const box = $("#notice");
  $("#notice-text").textContent = message;
  box.dataset.kind = kind;
  box.hidden = false;
  if (kind !== "error") noticeTimer = setTimeout(clearNotice, NOTICE_MS);
}

function clearNotice() {
  clearTimeout(noticeTimer);
  $("#notice").hidden = true;
}

function editingText(target) {
  return target.closest("input, textarea, select, [contenteditable]") !== null;
}

document.addEventListener("keydown", (e) => {
  if (editingText(e.target) || $("#ndv").open || $("#import-dialog").open) return;
  const mod = e.ctrlKey || e.metaKey;
  const key = e.key.toLowerCase();
  if (mod && key === "z") {
    e.preventDefault();
    if (e.shiftKey) state.doc.redo();
    else state.doc.undo();
  } else if (mod && key === "y") {
    e.preventDefault();
    state.doc.redo();
  } else if (mod && key === "s") {
    e.preventDefault();
    lifecycle.save();
  } else if (e.key === "Delete" || e.key === "Backspace") {
    deleteSelection();
  }
});

$("#sign-out").addEventListener("click", signOut);
$("#open-users").addEventListener("click", () => users.open());
api.addEventListener("signedout", () =>
  signin.show("This browser is no longer signed in (the key changed, or you signed out in another tab)."),
);
api.addEventListener("wrote", (e) => NOT_ACTIONS.has(e.detail.path) || clearNotice());
$("#notice-close").addEventListener("click", clearNotice);
$("#open-chat").addEventListener("click", async () => {
  if (state.doc.dirty && !(await lifecycle.save())) return;
  chat.open();
});
$("#toggle-active").addEventListener("click", toggleActive);
$("#add-node").addEventListener("click", addNode);
$("#undo").addEventListener("click", () => state.doc.undo());
$("#redo").addEventListener("click", () => state.doc.redo());
$("#workflow-name").addEventListener("change", (e) => {
  state.doc.setName(e.target.value.trim() || "My workflow");
});
lifecycle.wire();
push.addEventListener("open", (e) => e.detail.reconnected && checkQuiet(true));
push.addEventListener("push", (e) => executions.handle(e.detail));
push.addEventListener("down", () => ($("#push-state").dataset.state = "down"));
push.addEventListener("open", () => ($("#push-state").dataset.state = "up"));
setInterval(() => checkQuiet(), POLL_MS);

boot();
