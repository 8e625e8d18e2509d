// The picker of what answers: workflow agents, the user's personal agents and models, from
// POST /rest/chat/models (n8n's ChatModelsResponse, one list per provider). The choice is kept for
// the next new chat; an open conversation shows what it was answered by.

import { el } from "/static/editor/util.js";

const STORE = "mini-n8n-hub/model";
const GROUPS = [
  ["n8n", "Workflow agents"],
  ["custom-agent", "Personal agents"],
  ["openai", "Models"],
  ["mock", "Models"],
];

// One string per choice, from a model reference ({provider, workflowId|agentId|model}).
export function keyOf(ref, credentialId) {
  if (ref.provider === "n8n") return `n8n:${ref.workflowId}`;
  if (ref.provider === "custom-agent") return `custom-agent:${ref.agentId}`;
  if (ref.provider === "openai") return `openai:${credentialId || ""}:${ref.model}`;
  return `${ref.provider}:${ref.model || ref.provider}`;
}

export function iconText(icon) {
  return icon && icon.type === "emoji" ? icon.value : "";
}

export class Picker extends EventTarget {
  // Events: "change" (the user picked another).
  constructor(select, { api }) {
    super();
    this.select = select;
    this.api = api;
    this.entries = new Map();
    select.addEventListener("change", () => {
      this.remember();
      this.dispatchEvent(new CustomEvent("change"));
    });
  }

  async load() {
    const wanted = this.select.value || stored();
    const data = await this.api.models();
    this.entries.clear();
    const groups = new Map();
    for (const [provider, label] of GROUPS) {
      for (const dto of data[provider]?.models || []) {
        const key = keyOf(dto.model, dto.credentialId);
        this.entries.set(key, { key, ...dto });
        if (!groups.has(label)) groups.set(label, el("optgroup", { label }));
        const name = [iconText(dto.icon), dto.name].filter(Boolean).join(" ");
        groups.get(label).append(el("option", { value: key, text: name }));
      }
    }
    this.select.replaceChildren(...groups.values());
    this.choose(this.entries.has(wanted) ? wanted : this.select.options[0]?.value ?? "");
  }

  get current() {
    return this.entries.get(this.select.value) ?? null;
  }

  // The personal agents' model choices: models only.
  models() {
    return [...this.entries.values()].filter((e) => ["openai", "mock"].includes(e.model.provider));
  }

  choose(key) {
    this.select.value = key;
  }

  // What answered the conversation; one no longer offered shows, and says so.
  showSession(session) {
    if (!session.provider) return;
    const ref = { provider: session.provider, model: session.model,
      workflowId: session.workflowId, agentId: session.agentId };
    const key = keyOf(ref, session.credentialId);
    if (!this.entries.has(key)) {
      const name = `${session.agentName || session.model} (no longer offered)`;
      this.entries.set(key, { key, model: ref, name, metadata: { allowFileUploads: false } });
      this.select.append(el("option", { value: key, text: name }));
    }
    this.choose(key);
  }

  remember() {
    try {
      localStorage.setItem(STORE, this.select.value);
    } catch {
      // storage disabled: the first entry next time
    }
  }
}

function stored() {
  try {
    return localStorage.getItem(STORE) || "";
  } catch {
    return "";
  }
}
