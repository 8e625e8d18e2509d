// The node creator: a searchable panel of node types by group (Triggers; AI: agents, models,
// memory, tools; Core). Opened from "Add node" it lists everything; opened from an Agent's slot
// it lists only the types that fit that slot. Picking one calls back with the type.

import { GROUPS } from "./node-types.js";
import { el } from "./util.js";

export class NodeCreator {
  constructor(root) {
    this.root = root;
    this.title = root.querySelector("#creator-title");
    this.search = root.querySelector("#creator-search");
    this.list = root.querySelector("#creator-list");
    this.types = null;
    this.request = null; // {filter, onPick}
    this.search.addEventListener("input", () => this.draw());
    this.search.addEventListener("keydown", (e) => {
      if (e.key === "Escape") this.close();
      if (e.key === "Enter") {
        e.preventDefault();
        this.list.querySelector(".creator-item")?.click();
      }
    });
    root.querySelector("#creator-close").addEventListener("click", () => this.close());
  }

  setTypes(types) {
    this.types = types;
  }

  // slot: an ai_* connection type to filter by (null: every type), called `label`; after: the
  // selected node the new one will be connected to.
  open({ slot = null, label = "", after = null, onPick }) {
    this.request = { slot, onPick };
    const plain = after ? `Add a node, connected to “${after}”` : "Add a node";
    this.title.textContent = slot ? `Add ${label || slot}` : plain;
    this.root.dataset.slot = slot || "";
    this.search.value = "";
    this.root.hidden = false;
    this.draw();
    this.search.focus();
  }

  close() {
    this.root.hidden = true;
    this.request = null;
  }

  draw() {
    if (!this.request || !this.types) return;
    const { slot } = this.request;
    const query = this.search.value.trim().toLowerCase();
    const candidates = (slot ? this.types.fitting(slot) : this.types.all()).filter((t) => {
      if (!query) return true;
      const words = `${t.displayName} ${t.name} ${t.description} ${t.subtitle}`.toLowerCase();
      return query.split(/\s+/).every((q) => words.includes(q));
    });
    const sections = [];
    for (const [group, label] of GROUPS) {
      const inGroup = candidates
        .filter((t) => t.group === group)
        .sort((a, b) => a.displayName.localeCompare(b.displayName));
      if (!inGroup.length) continue;
      sections.push(
        el("li", { class: "creator-group", "data-group": group, text: label }),
        ...inGroup.map((t) =>
          el(
            "li",
            {},
            el(
              "button",
              {
                type: "button",
                class: "creator-item",
                "data-type": t.name,
                onclick: () => this.pick(t),
              },
              el("strong", { text: t.displayName }),
              el("small", { class: "muted", text: t.description }),
            ),
          ),
        ),
      );
    }
    if (!sections.length) sections.push(el("li", { class: "muted", text: "No node matches." }));
    this.list.replaceChildren(...sections);
  }

  pick(type) {
    const { onPick } = this.request;
    this.close();
    onPick(type);
  }
}
