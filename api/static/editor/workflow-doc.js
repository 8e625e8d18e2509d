// The workflow being edited, in n8n's JSON, and every change the editor makes to it. Each change
// keeps a snapshot of what was before, so undo/redo (Ctrl+Z / Ctrl+Shift+Z) restores exactly
// that state: a deleted node comes back with its connections. Listeners hear "change" with
// {kind} after every change, undo and redo.

import { randomId } from "./util.js";

const LIMIT = 100; // undo steps kept

export class WorkflowDoc extends EventTarget {
  constructor(workflow) {
    super();
    this.data = normalize(structuredClone(workflow));
    this.undoStack = [];
    this.redoStack = [];
    this.dirty = false;
  }

  get nodes() {
    return this.data.nodes;
  }

  get connections() {
    return this.data.connections;
  }

  node(name) {
    return this.data.nodes.find((n) => n.name === name) || null;
  }

  // --- history ---------------------------------------------------------------------------
  change(kind, mutate, detail = {}) {
    const before = JSON.stringify(this.data);
    const result = mutate(this.data);
    if (JSON.stringify(this.data) === before) return result;
    this.undoStack.push(before);
    if (this.undoStack.length > LIMIT) this.undoStack.shift();
    this.redoStack = [];
    this.dirty = true;
    this.emit(kind, detail);
    return result;
  }

  undo() {
    return this.travel(this.undoStack, this.redoStack, "undo");
  }

  redo() {
    return this.travel(this.redoStack, this.undoStack, "redo");
  }

  travel(from, to, kind) {
    if (!from.length) return false;
    to.push(JSON.stringify(this.data));
    this.data = JSON.parse(from.pop());
    this.dirty = true;
    this.emit(kind);
    return true;
  }

  emit(kind, detail = {}) {
    this.dispatchEvent(new CustomEvent("change", { detail: { ...detail, kind } }));
  }

  markSaved(saved) {
    // The server's answer carries the new versionId (and id, for a first save).
    this.data.id = saved.id;
    this.data.versionId = saved.versionId;
    this.data.active = saved.active;
    this.dirty = false;
    this.emit("saved");
  }

  // --- nodes -----------------------------------------------------------------------------
  uniqueName(base) {
    const taken = new Set(this.data.nodes.map((n) => n.name));
    if (!taken.has(base)) return base;
    let i = 1;
    while (taken.has(`${base}${i}`)) i += 1;
    return `${base}${i}`; // n8n's way: "AI Agent1"
  }

  // `via` connects it in the same step: {type, node} puts the new sub-node into `node`'s slot
  // of that type; {type: "main", node, after: true, output} connects `node`'s output to it.
  addNode(type, position, via = null) {
    const name = this.uniqueName(type.displayName);
    return this.change(
      "add",
      (data) => {
        const node = {
          parameters: {},
          id: uuid(),
          name,
          type: type.name,
          typeVersion: type.version,
          position: position.map((v) => Math.round(v / 20) * 20),
        };
        if (type.webhook) node.webhookId = uuid();
        data.nodes.push(node);
        if (via?.after) link(data, via.node, "main", name, via.output || 0, 0);
        else if (via) link(data, name, via.type, via.node);
        return node;
      },
      { name },
    );
  }

  removeNodes(names) {
    const gone = new Set(names);
    this.change("delete", (data) => {
      data.nodes = data.nodes.filter((n) => !gone.has(n.name));
      for (const name of gone) delete data.connections[name];
      for (const byType of Object.values(data.connections)) {
        for (const [type, outputs] of Object.entries(byType)) {
          byType[type] = outputs.map((targets) => (targets || []).filter((t) => !gone.has(t.node)));
        }
      }
      prune(data);
    });
  }

  moveNode(name, position) {
    this.change(
      "move",
      () => {
        const node = this.node(name);
        if (node) node.position = position.map((v) => Math.round(v / 20) * 20);
      },
      { name },
    );
  }

  renameNode(oldName, wanted) {
    const newName = wanted.trim();
    if (!newName || newName === oldName) return null;
    if (this.node(newName)) throw new Error(`A node called "${newName}" already exists.`);
    this.change("rename", (data) => {
      this.node(oldName).name = newName;
      if (data.connections[oldName]) {
        data.connections[newName] = data.connections[oldName];
        delete data.connections[oldName];
      }
      for (const byType of Object.values(data.connections)) {
        for (const outputs of Object.values(byType)) {
          for (const targets of outputs) {
            for (const t of targets || []) if (t.node === oldName) t.node = newName;
          }
        }
      }
      for (const node of data.nodes) node.parameters = renameInValue(node.parameters, oldName, newName);
    }, { from: oldName, to: newName });
    return newName;
  }

  setParameters(name, parameters, kind = "parameter") {
    this.change(kind, () => {
      this.node(name).parameters = structuredClone(parameters);
    });
  }

  setCredential(name, credentialType, credential) {
    this.change("parameter", () => {
      const node = this.node(name);
      const creds = { ...(node.credentials || {}) };
      if (credential) creds[credentialType] = { id: credential.id, name: credential.name };
      else delete creds[credentialType];
      if (Object.keys(creds).length) node.credentials = creds;
      else delete node.credentials;
    });
  }

  setName(name) {
    this.change("rename-workflow", (data) => {
      data.name = name;
    });
  }

  // --- connections -----------------------------------------------------------------------
  connect(source, type, target, output = 0, input = 0) {
    return this.change("connect", (data) => link(data, source, type, target, output, input));
  }

  disconnect({ source, type, output = 0, target }) {
    this.change("disconnect", (data) => {
      const outputs = (data.connections[source] || {})[type] || [];
      outputs[output] = (outputs[output] || []).filter((t) => t.node !== target);
      prune(data);
    });
  }

  // [{source, type, output, target}] of every connection
  edges() {
    const found = [];
    for (const [source, byType] of Object.entries(this.data.connections)) {
      for (const [type, outputs] of Object.entries(byType || {})) {
        (outputs || []).forEach((targets, output) => {
          for (const t of targets || []) found.push({ source, type, output, target: t.node });
        });
      }
    }
    return found;
  }

  count(target, type) {
    return this.edges().filter((e) => e.target === target && e.type === type).length;
  }
}

function normalize(workflow) {
  workflow.nodes = workflow.nodes || [];
  workflow.connections = workflow.connections || {};
  return workflow;
}

function link(data, source, type, target, output = 0, input = 0) {
  const byType = (data.connections[source] = data.connections[source] || {});
  const outputs = (byType[type] = byType[type] || [[]]);
  for (let i = 0; i <= output; i++) if (!outputs[i]) outputs[i] = [];
  if (outputs[output].some((t) => t.node === target && (t.index || 0) === input)) return false;
  outputs[output].push({ node: target, type, index: input });
  return true;
}

function prune(data) {
  for (const [source, byType] of Object.entries(data.connections)) {
    for (const [type, outputs] of Object.entries(byType)) {
      if (!outputs.some((targets) => (targets || []).length)) delete byType[type];
    }
    if (!Object.keys(byType).length) delete data.connections[source];
  }
}

// n8n renames references in expressions: $('Old'), $node["Old"], $node.Old, $items("Old").
function renameInValue(value, oldName, newName) {
  if (typeof value === "string") {
    return value.startsWith("=") ? renameInExpression(value, oldName, newName) : value;
  }
  if (Array.isArray(value)) return value.map((v) => renameInValue(v, oldName, newName));
  if (value && typeof value === "object") {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [k, renameInValue(v, oldName, newName)]),
    );
  }
  return value;
}

export function renameInExpression(text, oldName, newName) {
  const esc = oldName.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const quoted = (q) => new RegExp(`(\\$\\(\\s*|\\$node\\[\\s*|\\$items\\(\\s*)${q}${esc}${q}`, "g");
  let out = text;
  for (const q of ["'", '"', "`"]) {
    const safe = newName.replaceAll(q, `\\${q}`);
    out = out.replace(quoted(q), (_, prefix) => `${prefix}${q}${safe}${q}`);
  }
  if (/^[A-Za-z_$][\w$]*$/.test(oldName)) {
    const dotted = new RegExp(`\\$node\\.${esc}(?![\\w$])`, "g");
    const plain = /^[A-Za-z_$][\w$]*$/.test(newName);
    out = out.replace(dotted, () => (plain ? `$node.${newName}` : `$node["${newName}"]`));
  }
  return out;
}

export function uuid() {
  const h = randomId(16);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
}
