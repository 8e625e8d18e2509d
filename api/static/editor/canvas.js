// The canvas: the workflow's nodes at their positions, main connections left to right, AI
// connections from a sub-node's top to the bottom of the node it serves. Each node shows how
// its last run went and how many runs it had in the execution on display.

import { svg } from "./util.js";

const MAIN = { w: 100, h: 100 };
const SUB = { w: 80, h: 80 };
const AI_ORDER = ["ai_languageModel", "ai_memory", "ai_tool"];
const AI_LABELS = { ai_languageModel: "Model", ai_memory: "Memory", ai_tool: "Tool" };
const STICKY = "n8n-nodes-base.stickyNote";
const PAD = 80;

export class Canvas {
  constructor(root, { onNodeClick }) {
    this.root = root;
    this.onNodeClick = onNodeClick;
    this.boxes = new Map(); // node name -> {x, y, w, h, g}
    this._frame = 0;
  }

  render(workflow) {
    this.root.replaceChildren();
    this.boxes.clear();
    const nodes = workflow.nodes || [];
    const connections = workflow.connections || {};
    const subs = subNodeNames(connections);
    const aiInputs = aiInputsByTarget(connections);
    const notes = svg("g", { class: "stickies" });
    const edges = svg("g", { class: "connections" });
    const layer = svg("g", { class: "nodes" });
    for (const node of nodes) {
      if (node.type === STICKY) notes.append(sticky(node));
      else layer.append(this.node(node, subs.has(node.name), aiInputs.get(node.name) || []));
    }
    for (const [source, byType] of Object.entries(connections)) {
      for (const [type, outputs] of Object.entries(byType || {})) {
        (outputs || []).forEach((targets, output) => {
          for (const target of targets || []) edges.append(this.edge(source, output, type, target));
        });
      }
    }
    this.root.append(notes, edges, layer);
    this.fit(nodes);
  }

  node(node, isSub, aiTypes) {
    const [x, y] = node.position || [0, 0];
    const size = isSub ? SUB : { w: Math.max(MAIN.w, aiTypes.length * 70), h: MAIN.h };
    const kind = isSub ? "sub" : isTrigger(node.type) ? "trigger" : "main";
    const g = svg("g", {
      class: `node ${kind}${node.disabled ? " disabled" : ""}`,
      "data-node-name": node.name,
      "data-status": "none",
      "data-runs": "0",
      transform: `translate(${x} ${y})`,
      tabindex: "0",
      role: "button",
      "aria-label": node.name,
      onclick: () => this.onNodeClick(node.name),
      onkeydown: (e) => (e.key === "Enter" || e.key === " ") && this.onNodeClick(node.name),
    });
    const radius = isSub ? size.w / 2 : kind === "trigger" ? 24 : 10;
    g.append(
      svg("rect", { class: "body", width: size.w, height: size.h, rx: radius, ry: radius }),
      svg("text", { class: "icon", x: size.w / 2, y: size.h / 2 + 7, text: initials(node) }),
      svg("text", { class: "label", x: size.w / 2, y: size.h + 20, text: node.name }),
    );
    aiTypes.forEach((type, i) => {
      const cx = slotX(size.w, aiTypes.length, i);
      g.append(
        svg("text", { class: "slot", x: cx, y: size.h - 8, text: AI_LABELS[type] || type }),
      );
    });
    const badge = svg("g", { class: "run-badge", transform: `translate(${size.w - 4} 4)` });
    badge.append(svg("circle", { r: 13 }), svg("text", { class: "run-count", y: 5, text: "" }));
    const mark = isSub ? { x: size.w / 2, y: 22 } : { x: 8, y: 20 };
    g.append(badge, svg("text", { class: "state-mark", ...mark, text: "" }));
    this.boxes.set(node.name, { x, y, w: size.w, h: size.h, g, aiTypes });
    return g;
  }

  edge(source, output, type, target) {
    const from = this.boxes.get(source);
    const to = this.boxes.get(target.node);
    if (!from || !to) return null;
    if (type === "main") {
      const outputs = 1 + output;
      const sy = from.y + (from.h * (output + 1)) / (outputs + 1);
      const [x1, y1, x2, y2] = [from.x + from.w, sy, to.x, to.y + to.h / 2];
      const bend = Math.max(40, Math.abs(x2 - x1) / 2);
      const d = `M${x1},${y1} C${x1 + bend},${y1} ${x2 - bend},${y2} ${x2},${y2}`;
      return svg("path", { class: "edge main", d, "data-from": source, "data-to": target.node });
    }
    const slot = Math.max(0, to.aiTypes.indexOf(type));
    const [x1, y1] = [from.x + from.w / 2, from.y];
    const [x2, y2] = [to.x + slotX(to.w, Math.max(1, to.aiTypes.length), slot), to.y + to.h];
    const bend = Math.max(30, Math.abs(y1 - y2) / 2);
    const d = `M${x1},${y1} C${x1},${y1 - bend} ${x2},${y2 + bend} ${x2},${y2}`;
    return svg("path", { class: `edge ai ${type}`, d, "data-from": source, "data-to": target.node });
  }

  fit(nodes) {
    const boxes = [...this.boxes.values()];
    for (const node of nodes) {
      if (node.type !== STICKY) continue;
      const [x, y] = node.position || [0, 0];
      const p = node.parameters || {};
      boxes.push({ x, y, w: p.width || 240, h: p.height || 160 });
    }
    if (!boxes.length) return;
    const minX = Math.min(...boxes.map((b) => b.x)) - PAD;
    const minY = Math.min(...boxes.map((b) => b.y)) - PAD;
    const maxX = Math.max(...boxes.map((b) => b.x + b.w)) + PAD;
    const maxY = Math.max(...boxes.map((b) => b.y + b.h)) + PAD + 20; // labels under nodes
    this.root.setAttribute("viewBox", `${minX} ${minY} ${maxX - minX} ${maxY - minY}`);
  }

  // Mark nodes from an execution's state (or clear the marks with null).
  show(exec) {
    for (const [name, box] of this.boxes) {
      const state = exec ? exec.nodes.get(name) : null;
      const runs = state ? state.runs.filter(Boolean) : [];
      let status = "none";
      if (state && state.running) status = "running";
      else if (runs.length) status = runs.some((r) => r.status === "error") ? "error" : "success";
      box.g.dataset.status = status;
      box.g.dataset.runs = String(runs.length);
      box.g.querySelector(".run-count").textContent = runs.length ? String(runs.length) : "";
      const mark = { success: "✓", error: "!", running: "…" }[status] || "";
      box.g.querySelector(".state-mark").textContent = mark;
      box.g.querySelector("title")?.remove();
      if (runs.length) {
        const items = runs.map((r) => r.itemCount ?? 0).join(", ");
        box.g.append(svg("title", { text: `${name}: ${runs.length} run(s), items ${items}` }));
      }
    }
  }
}

function subNodeNames(connections) {
  const names = new Set();
  for (const [source, byType] of Object.entries(connections)) {
    if (Object.keys(byType || {}).some((t) => t.startsWith("ai_"))) names.add(source);
  }
  return names;
}

function aiInputsByTarget(connections) {
  const inputs = new Map();
  for (const byType of Object.values(connections)) {
    for (const [type, outputs] of Object.entries(byType || {})) {
      if (!type.startsWith("ai_")) continue;
      for (const targets of outputs || []) {
        for (const target of targets || []) {
          const list = inputs.get(target.node) || [];
          if (!list.includes(type)) list.push(type);
          inputs.set(target.node, list);
        }
      }
    }
  }
  for (const list of inputs.values()) list.sort((a, b) => order(a) - order(b));
  return inputs;
}

function order(type) {
  const i = AI_ORDER.indexOf(type);
  return i < 0 ? AI_ORDER.length : i;
}

function slotX(width, count, index) {
  return (width * (index + 1)) / (count + 1);
}

function isTrigger(type) {
  return /trigger$/i.test(type) || type === "n8n-nodes-base.webhook";
}

function initials(node) {
  const words = node.name.split(/\s+/).filter(Boolean);
  return words
    .slice(0, 2)
    .map((w) => w[0].toUpperCase())
    .join("");
}

function sticky(node) {
  const [x, y] = node.position || [0, 0];
  const p = node.parameters || {};
  const [w, h] = [p.width || 240, p.height || 160];
  const g = svg("g", { class: "sticky", transform: `translate(${x} ${y})` });
  g.append(svg("rect", { width: w, height: h, rx: 6 }));
  const lines = String(p.content || "")
    .split("\n")
    .map((line) => line.replace(/^#+\s*/, ""))
    .filter(Boolean)
    .slice(0, Math.floor((h - 10) / 20))
    .map((line) => (line.length > w / 8 ? `${line.slice(0, Math.floor(w / 8) - 1)}…` : line));
  lines.forEach((line, i) => {
    g.append(svg("text", { x: 12, y: 26 + i * 20, class: i ? "" : "title", text: line }));
  });
  return g;
}
