// The canvas: the workflow's nodes at their positions, main connections left to right, AI
// connections from a sub-node's top to the slot of the node it serves. Each node shows how its
// last run went and how many runs it had in the execution on display.
//
// Editing: drag a node to move it; drag from a node's output handle (right) to another node's
// input handle (left) to connect `main`, or from a sub-node's top handle to a slot; click a
// slot's "+" (Model, Memory, Tool) to add a sub-node there; click a node or a connection to
// select it. What the user did is reported
// through the callbacks; main.js changes the document and renders again.

import { slotLabel } from "./node-types.js";
import { drawPorts, portY } from "./ports.js";
import { svg } from "./util.js";

const MAIN = { w: 100, h: 100 };
const SUB = { w: 80, h: 80 };
const AI_ORDER = ["ai_languageModel", "ai_memory", "ai_tool"];
const STICKY = "n8n-nodes-base.stickyNote";
const PAD = 80;
const MIN_VIEW = { w: 900, h: 520 }; // a lone node is not drawn huge
const DRAG_PX = 4; // a press that moves less than this is a click

export class Canvas {
  constructor(root, callbacks) {
    this.root = root;
    this.cb = callbacks; // onNodeClick, onSlotClick, onMove, onConnect, onSelect, onHintClick
    this.types = null;
    this.boxes = new Map(); // node name -> {x, y, w, h, g, aiTypes, node}
    this.selection = null; // {kind: "node", name} | {kind: "edge", edge}
    this.workflow = { nodes: [], connections: {} };
    root.addEventListener("pointerdown", (e) => {
      if (e.target !== root) return;
      this.select(null);
      this.pan(e);
    });
    root.addEventListener("wheel", (e) => this.zoom(e), { passive: false });
  }

  // --- view: drag the empty canvas to pan, the wheel to zoom around the pointer ----------
  view() {
    return this.root.getAttribute("viewBox").split(/\s+/).map(Number);
  }

  pan(event) {
    if (event.button !== 0) return;
    const [x, y, w, h] = this.view();
    const scale = w / this.root.clientWidth;
    const [sx, sy] = [event.clientX, event.clientY];
    const move = (e) => {
      const [dx, dy] = [(e.clientX - sx) * scale, (e.clientY - sy) * scale];
      this.root.setAttribute("viewBox", `${x - dx} ${y - dy} ${w} ${h}`);
    };
    const up = () => {
      window.removeEventListener("pointermove", move);
      window.removeEventListener("pointerup", up);
    };
    window.addEventListener("pointermove", move);
    window.addEventListener("pointerup", up);
  }

  zoom(event) {
    event.preventDefault();
    const p = this.point(event);
    const factor = Math.exp(Math.max(-1, Math.min(1, event.deltaY / 300)));
    const [x, y, w, h] = this.view();
    const next = [p.x - (p.x - x) * factor, p.y - (p.y - y) * factor, w * factor, h * factor];
    this.root.setAttribute("viewBox", next.join(" "));
  }

  setTypes(types) {
    this.types = types;
  }

  // fit: frame every node; reveal: bring that node into view if it is not (a drag, an add),
  // moving the view as little as possible.
  render(workflow, { fit = false, reveal = null } = {}) {
    this.workflow = workflow;
    this.root.replaceChildren();
    this.boxes.clear();
    const nodes = workflow.nodes || [];
    const connections = workflow.connections || {};
    const subs = subNodeNames(connections, nodes, this.types);
    const aiInputs = aiInputsByTarget(connections);
    const notes = svg("g", { class: "stickies" });
    this.edgeLayer = svg("g", { class: "connections" });
    const layer = svg("g", { class: "nodes" });
    for (const node of nodes) {
      if (node.type === STICKY) notes.append(sticky(node));
      else layer.append(this.node(node, subs.has(node.name), this.slotsOf(node, aiInputs)));
    }
    this.root.append(notes, this.edgeLayer, layer);
    this.drawEdges();
    if (this.selection && !this.selectionExists()) this.selection = null;
    this.markSelection();
    if (fit || !this.root.getAttribute("viewBox")) this.fit(nodes);
    else if (reveal) this.reveal(reveal);
  }

  // The ai_* slots drawn under a node: its declared inputs (a trigger's only once used), and
  // any connected type it does not declare, so nothing on file is hidden.
  slotsOf(node, aiInputs) {
    const connected = aiInputs.get(node.name) || [];
    const declared = this.types ? this.types.slots(node.type) : [];
    const trigger = this.types?.get(node.type)?.group === "trigger";
    const types = declared
      .map((s) => s.type)
      .filter((t) => !trigger || connected.includes(t));
    for (const t of connected) if (!types.includes(t)) types.push(t);
    return types.sort((a, b) => order(a) - order(b));
  }

  node(node, isSub, aiTypes) {
    const [x, y] = node.position || [0, 0];
    const size = isSub ? SUB : { w: Math.max(MAIN.w, aiTypes.length * 90), h: MAIN.h };
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
      onkeydown: (e) => (e.key === "Enter" || e.key === " ") && this.clickNode(node.name),
    });
    const radius = isSub ? size.w / 2 : kind === "trigger" ? 24 : 10;
    const body = svg("rect", { class: "body", width: size.w, height: size.h, rx: radius, ry: radius });
    g.append(
      body,
      svg("text", { class: "icon", x: size.w / 2, y: size.h / 2 + 7, text: initials(node) }),
      svg("text", { class: "label", x: size.w / 2, y: size.h + 20, text: node.name }),
    );
    g.addEventListener("pointerdown", (e) => this.pressNode(e, node.name));
    aiTypes.forEach((type, i) => {
      const cx = slotX(size.w, aiTypes.length, i);
      const label = slotLabel(this.types, node.type, type);
      const slot = svg("g", {
        class: "slot",
        "data-slot": type,
        transform: `translate(${cx} ${size.h})`,
        role: "button",
        tabindex: "0",
        "aria-label": `Add ${label} to ${node.name}`,
      });
      slot.append(
        svg("text", { class: "slot-label", y: -8, text: label }),
        svg("circle", { class: "slot-add", cy: 34, r: 9, "data-slot": type }),
        svg("text", { class: "slot-plus", y: 38, text: "+" }),
      );
      slot.addEventListener("pointerdown", (e) => e.stopPropagation());
      slot.addEventListener("keydown", (e) => {
        if (e.key !== "Enter" && e.key !== " ") return;
        e.stopPropagation();
        e.preventDefault();
        this.cb.onSlotClick(node.name, type);
      });
      slot.addEventListener("click", (e) => {
        e.stopPropagation();
        this.cb.onSlotClick(node.name, type);
      });
      g.append(slot);
    });
    const supplies = this.types?.supplies(node.type);
    if (isSub && supplies) {
      const attrs = { class: "handle ai-out", cx: size.w / 2, cy: 0, r: 7, "data-type": supplies };
      const out = svg("circle", attrs);
      out.addEventListener("pointerdown", (e) => this.pressWire(e, node.name, supplies));
      g.append(out);
    }
    const ports = this.types && !isSub ? this.types.mainPorts(node, this.connectedOutputs(node.name)) : null;
    if (ports) drawPorts(g, node, size, ports, (e, i) => this.pressWire(e, node.name, "main", i));
    const badge = svg("g", { class: "run-badge", transform: `translate(${size.w - 4} 4)` });
    badge.append(svg("circle", { r: 13 }), svg("text", { class: "run-count", y: 5, text: "" }));
    const mark = isSub ? { x: size.w / 2, y: 22 } : { x: 8, y: 20 };
    g.append(badge, svg("text", { class: "state-mark", ...mark, text: "" }));
    g.append(svg("text", { class: "issue", x: size.w / 2, y: -12, text: "" }));
    const hint = svg("g", { class: "hint-mark" }, svg("text", { x: size.w / 2, y: -30, text: "" }), svg("title"));
    hint.addEventListener("pointerdown", (e) => e.stopPropagation());
    hint.addEventListener("click", () => hint.dataset.open && this.cb.onHintClick?.(hint.dataset.open));
    g.append(hint);
    this.boxes.set(node.name, { x, y, w: size.w, h: size.h, g, aiTypes, node, ports });
    return g;
  }

  // The highest main output of `name` that has a connection, plus one.
  connectedOutputs(name) {
    const outputs = ((this.workflow.connections || {})[name] || {}).main || [];
    let count = 0;
    outputs.forEach((targets, i) => {
      if ((targets || []).length) count = i + 1;
    });
    return count;
  }

  drawEdges() {
    this.edgeLayer.replaceChildren();
    for (const [source, byType] of Object.entries(this.workflow.connections || {})) {
      for (const [type, outputs] of Object.entries(byType || {})) {
        (outputs || []).forEach((targets, output) => {
          for (const target of targets || []) {
            const d = this.edgePath(source, output, type, target.node, target.index || 0);
            if (!d) continue;
            const edge = { source, type, output, target: target.node };
            const cls = type === "main" ? "edge main" : `edge ai ${type}`;
            const attrs = { d, "data-from": source, "data-to": target.node, "data-type": type };
            const hit = svg("path", { class: "wire-hit", ...attrs });
            hit.addEventListener("pointerdown", (e) => e.stopPropagation());
            hit.addEventListener("click", () => this.select({ kind: "edge", edge }));
            this.edgeLayer.append(svg("path", { class: cls, ...attrs }), hit);
          }
        });
      }
    }
  }

  edgePath(source, output, type, target, input = 0) {
    const from = this.boxes.get(source);
    const to = this.boxes.get(target);
    if (!from || !to) return null;
    if (type === "main") {
      const outputs = Math.max(from.ports?.outputs || 1, output + 1);
      const inputs = Math.max(to.ports?.inputs || 1, input + 1);
      const sy = from.y + portY(from.h, outputs, output);
      return curve(from.x + from.w, sy, to.x, to.y + portY(to.h, inputs, input));
    }
    const slot = Math.max(0, to.aiTypes.indexOf(type));
    const [x1, y1] = [from.x + from.w / 2, from.y];
    const [x2, y2] = [to.x + slotX(to.w, Math.max(1, to.aiTypes.length), slot), to.y + to.h];
    const bend = Math.max(30, Math.abs(y1 - y2) / 2);
    return `M${x1},${y1} C${x1},${y1 - bend} ${x2},${y2 + bend} ${x2},${y2}`;
  }

  // --- pointer: move, click, connect -----------------------------------------------------
  point(event) {
    const p = new DOMPoint(event.clientX, event.clientY);
    return p.matrixTransform(this.root.getScreenCTM().inverse());
  }

  pressNode(event, name) {
    if (event.button !== 0) return;
    event.stopPropagation();
    const box = this.boxes.get(name);
    const start = this.point(event);
    const [sx, sy] = [event.clientX, event.clientY];
    let moved = false;
    const move = (e) => {
      if (!moved && Math.hypot(e.clientX - sx, e.clientY - sy) < DRAG_PX) return;
      moved = true;
      const p = this.point(e);
      box.x = box.node.position[0] + (p.x - start.x);
      box.y = box.node.position[1] + (p.y - start.y);
      box.g.setAttribute("transform", `translate(${box.x} ${box.y})`);
      this.drawEdges();
    };
    const up = () => {
      window.removeEventListener("pointermove", move);
      window.removeEventListener("pointerup", up);
      if (moved) this.cb.onMove(name, [box.x, box.y]);
      else this.clickNode(name);
    };
    window.addEventListener("pointermove", move);
    window.addEventListener("pointerup", up);
  }

  clickNode(name) {
    this.select({ kind: "node", name });
    this.cb.onNodeClick(name);
  }

  // Drag a new connection: from a main output to a main input, or from a sub-node's top to
  // an ai_* slot of the node it should serve.
  pressWire(event, source, type, output = 0) {
    if (event.button !== 0) return;
    event.stopPropagation();
    const box = this.boxes.get(source);
    const main = type === "main";
    const outputs = box.ports?.outputs || 1;
    const [x1, y1] = main
      ? [box.x + box.w, box.y + portY(box.h, outputs, output)]
      : [box.x + box.w / 2, box.y];
    const wire = svg("path", { class: "edge drawing", d: "" });
    this.edgeLayer.append(wire);
    const move = (e) => {
      const p = this.point(e);
      wire.setAttribute("d", main ? curve(x1, y1, p.x, p.y) : `M${x1},${y1} L${p.x},${p.y}`);
    };
    const up = (e) => {
      window.removeEventListener("pointermove", move);
      window.removeEventListener("pointerup", up);
      wire.remove();
      const hit = document.elementFromPoint(e.clientX, e.clientY);
      const target = hit?.closest(".node")?.getAttribute("data-node-name");
      if (!target || target === source) return;
      const port = hit.closest(".handle.in");
      if (main && port) {
        this.cb.onConnect(source, "main", target, "main", output, Number(port.getAttribute("data-input")) || 0);
      }
      const slot = hit.closest(".slot");
      if (!main && slot) this.cb.onConnect(source, slot.getAttribute("data-slot"), target, type);
    };
    window.addEventListener("pointermove", move);
    window.addEventListener("pointerup", up);
  }

  // --- selection -------------------------------------------------------------------------
  select(selection) {
    this.selection = selection;
    this.markSelection();
    this.cb.onSelect?.(selection);
  }

  selectionExists() {
    const s = this.selection;
    if (s.kind === "node") return this.boxes.has(s.name);
    const outputs = ((this.workflow.connections[s.edge.source] || {})[s.edge.type] || [])[s.edge.output];
    return Boolean(outputs && outputs.some((t) => t.node === s.edge.target));
  }

  markSelection() {
    for (const el of this.root.querySelectorAll(".selected")) el.classList.remove("selected");
    const s = this.selection;
    if (!s) return;
    if (s.kind === "node") this.boxes.get(s.name)?.g.classList.add("selected");
    else {
      const { source, target, type } = s.edge;
      const found = [...this.root.querySelectorAll(".edge")].find(
        (e) => e.dataset.from === source && e.dataset.to === target && e.dataset.type === type,
      );
      found?.classList.add("selected");
    }
  }

  // Issues (the engine's validation errors) shown under the node they name.
  showIssues(issues) {
    for (const [name, box] of this.boxes) {
      const text = issues.get(name) || "";
      box.g.querySelector(".issue").textContent = text;
      if (text) box.g.dataset.issue = text;
      else delete box.g.dataset.issue;
    }
  }

  // Hints (hints.js) above the node they are about: a short mark, the whole text as its tooltip;
  // a click opens the node the hint names.
  showHints(hints) {
    for (const [name, box] of this.boxes) {
      const hint = hints.get(name);
      const mark = box.g.querySelector(".hint-mark");
      mark.querySelector("text").textContent = hint ? hint.short : "";
      mark.querySelector("title").textContent = hint ? hint.text : "";
      if (hint) {
        box.g.dataset.hint = hint.text;
        mark.dataset.open = hint.trigger;
      } else {
        delete box.g.dataset.hint;
        delete mark.dataset.open;
      }
    }
  }

  // Where a new node goes: right of the rightmost main node, or under `parent` for a sub-node.
  placeFor(parentName, slotType) {
    const parent = parentName && this.boxes.get(parentName);
    if (parent) {
      // Slots 160 apart under the parent's centre; a slot's further sub-nodes to the right.
      const n = Math.max(1, parent.aiTypes.length);
      const i = Math.max(0, parent.aiTypes.indexOf(slotType));
      const already = this.subsOf(parentName, slotType);
      const x = parent.x + parent.w / 2 + (i - (n - 1) / 2) * 160 - SUB.w / 2 + already * 110;
      return [x, parent.y + 220];
    }
    const mains = [...this.boxes.values()].filter((b) => b.w >= MAIN.w);
    if (!mains.length) return [0, 0];
    const right = mains.reduce((a, b) => (b.x > a.x ? b : a));
    return [right.x + 260, right.y];
  }

  // Where a node added after `parentName` goes: right of it, level with its output `output`
  // (n8n's offsets for a node with several outputs), moved down past any node in the way.
  placeAfter(parentName, output = 0) {
    const parent = this.boxes.get(parentName);
    if (!parent) return this.placeFor(null);
    const outputs = parent.ports?.outputs || 1;
    const x = parent.x + parent.w + 160;
    let y = parent.y + (output - (outputs - 1) / 2) * (MAIN.h + 60);
    const taken = (b) => b.x < x + MAIN.w && x < b.x + b.w && b.y < y + MAIN.h && y < b.y + b.h;
    while ([...this.boxes.values()].some(taken)) y += MAIN.h + 60;
    return [x, y];
  }

  // Show node `name` whole (with its label) if it is not: the view pans as little as needed, at
  // the same zoom, so everything else keeps its place relative to the others; it zooms out only
  // when the node cannot fit otherwise.
  reveal(name) {
    const b = this.boxes.get(name);
    if (!b || !this.outOfView(name)) return;
    let [x, y, w, h] = this.view();
    const [x1, y1, x2, y2] = [b.x - PAD / 2, b.y - PAD / 2, b.x + b.w + PAD / 2, b.y + b.h + PAD / 2 + 30];
    const grow = Math.max(1, (x2 - x1) / w, (y2 - y1) / h);
    [w, h] = [w * grow, h * grow];
    if (x1 < x) x = x1;
    else if (x2 > x + w) x = x2 - w;
    if (y1 < y) y = y1;
    else if (y2 > y + h) y = y2 - h;
    this.root.setAttribute("viewBox", `${x} ${y} ${w} ${h}`);
  }

  outOfView(name) {
    const b = this.boxes.get(name);
    const [x, y, w, h] = this.view();
    return Boolean(b) && (b.x < x || b.y < y || b.x + b.w > x + w || b.y + b.h > y + h);
  }

  subsOf(target, type) {
    let count = 0;
    for (const byType of Object.values(this.workflow.connections || {})) {
      for (const targets of (byType || {})[type] || []) {
        count += (targets || []).filter((t) => t.node === target).length;
      }
    }
    return count;
  }

  fit(nodes) {
    const boxes = [...this.boxes.values()];
    for (const node of nodes) {
      if (node.type !== STICKY) continue;
      const [x, y] = node.position || [0, 0];
      const p = node.parameters || {};
      boxes.push({ x, y, w: p.width || 240, h: p.height || 160 });
    }
    if (!boxes.length) {
      // Room to the right of the first node and under it, where its sub-nodes go.
      this.root.setAttribute("viewBox", `${-PAD * 3} ${-PAD * 2} ${MIN_VIEW.w} ${MIN_VIEW.h}`);
      return;
    }
    let minX = Math.min(...boxes.map((b) => b.x)) - PAD;
    let minY = Math.min(...boxes.map((b) => b.y)) - PAD;
    let maxX = Math.max(...boxes.map((b) => b.x + b.w)) + PAD;
    let maxY = Math.max(...boxes.map((b) => b.y + b.h)) + PAD + 40; // labels and slots
    const [w, h] = [maxX - minX, maxY - minY];
    if (w < MIN_VIEW.w) [minX, maxX] = [minX - (MIN_VIEW.w - w) / 2, maxX + (MIN_VIEW.w - w) / 2];
    if (h < MIN_VIEW.h) [minY, maxY] = [minY - (MIN_VIEW.h - h) / 2, maxY + (MIN_VIEW.h - h) / 2];
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
      box.g.querySelector(":scope > title")?.remove(); // the run summary, not a hint's
      if (runs.length) {
        const items = runs.map((r) => r.itemCount ?? 0).join(", ");
        box.g.append(svg("title", { text: `${name}: ${runs.length} run(s), items ${items}` }));
      }
    }
  }
}

function curve(x1, y1, x2, y2) {
  const bend = Math.max(40, Math.abs(x2 - x1) / 2);
  return `M${x1},${y1} C${x1 + bend},${y1} ${x2 - bend},${y2} ${x2},${y2}`;
}

// Sub-nodes: those that supply an ai_* connection (declared), or have one on file.
function subNodeNames(connections, nodes, types) {
  const names = new Set();
  for (const node of nodes) if (types?.supplies(node.type)) names.add(node.name);
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
