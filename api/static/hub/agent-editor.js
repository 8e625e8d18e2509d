// The user's personal agents (n8n's "custom agents"): a list to edit or delete from, and a form
// for one: name, description, icon (an emoji), system prompt, up to 6 suggested prompts, a model
// the admin offers, and tools (GET /rest/chat/tools: the engine's).

import { el } from "/static/editor/util.js";
import { iconText, keyOf } from "./picker.js";

const MAX_PROMPTS = 6; // n8n's
const DEFAULT_ICON = "🤖";

export class AgentEditor {
  constructor(dialog, { api, picker, onSaved, onDeleted }) {
    this.dialog = dialog;
    this.api = api;
    this.picker = picker;
    this.onSaved = onSaved;
    this.onDeleted = onDeleted;
    this.editing = null;
    this.$ = (selector) => dialog.querySelector(selector);
    this.$("#agents-close").addEventListener("click", () => dialog.close());
    this.$("#new-agent").addEventListener("click", () => this.edit(null));
    this.$("#add-prompt").addEventListener("click", () => this.addPrompt(""));
    this.$("#cancel-agent").addEventListener("click", () => this.closeForm());
    this.$("#agent-form").addEventListener("submit", (e) => {
      e.preventDefault();
      this.save();
    });
  }

  async open() {
    this.closeForm();
    this.dialog.showModal();
    await this.list();
  }

  async list() {
    const [agents, tools] = await Promise.all([this.api.agents(), this.api.tools()]);
    this.tools = tools.map((t) => t.definition);
    this.$("#agents-list").replaceChildren(...agents.map((agent) =>
      el("li", { "data-agent-id": agent.id },
        el("span", { class: "agent-title", text: [iconText(agent.icon), agent.name].filter(Boolean).join(" ") }),
        el("button", { type: "button", class: "edit-agent", text: "Edit", onclick: () => this.edit(agent) }),
        el("button", { type: "button", class: "delete-agent", text: "Delete", onclick: () => this.remove(agent) }))));
    if (!agents.length) this.$("#agents-list").append(el("li", { class: "muted", text: "No personal agents yet." }));
  }

  edit(agent) {
    this.editing = agent;
    const form = this.$("#agent-form");
    form.hidden = false;
    this.$("#agent-form-title").textContent = agent ? `Edit ${agent.name}` : "New agent";
    this.$("#agent-name").value = agent?.name ?? "";
    this.$("#agent-description").value = agent?.description ?? "";
    this.$("#agent-icon").value = iconText(agent?.icon) || DEFAULT_ICON;
    this.$("#agent-system-prompt").value = agent?.systemPrompt ?? "";
    this.$("#agent-prompts").replaceChildren();
    for (const prompt of agent?.suggestedPrompts ?? []) this.addPrompt(prompt.text);
    this.fillModels(agent);
    this.fillTools(agent?.toolIds ?? []);
    this.$("#agent-error").textContent = "";
    this.$("#agent-name").focus();
  }

  fillModels(agent) {
    const models = this.picker.models();
    this.$("#agent-model").replaceChildren(...models.map((m) => el("option", { value: m.key, text: m.name })));
    if (agent) this.$("#agent-model").value = keyOf({ provider: agent.provider, model: agent.model }, agent.credentialId);
  }

  fillTools(chosen) {
    this.$("#agent-tools").replaceChildren(...this.tools.map((tool) => {
      const box = el("input", { type: "checkbox", value: tool.id, checked: chosen.includes(tool.id) });
      return el("label", { class: "tool" }, box, ` ${tool.name}`);
    }));
  }

  addPrompt(text) {
    const list = this.$("#agent-prompts");
    if (list.children.length >= MAX_PROMPTS) return;
    const input = el("input", { class: "agent-prompt", "aria-label": "Suggested prompt", maxlength: 256 });
    input.value = text;
    const row = el("li", {}, input, el("button", { type: "button", class: "remove-prompt",
      "aria-label": "Remove prompt", text: "×", onclick: () => { row.remove(); this.promptsFull(); } }));
    list.append(row);
    this.promptsFull();
    if (!text) input.focus();
  }

  promptsFull() {
    this.$("#add-prompt").disabled = this.$("#agent-prompts").children.length >= MAX_PROMPTS;
  }

  body() {
    const model = this.picker.entries.get(this.$("#agent-model").value);
    const icon = this.$("#agent-icon").value.trim() || DEFAULT_ICON;
    return {
      name: this.$("#agent-name").value.trim(),
      description: this.$("#agent-description").value.trim(),
      icon: { type: "emoji", value: icon },
      systemPrompt: this.$("#agent-system-prompt").value,
      suggestedPrompts: [...this.dialog.querySelectorAll(".agent-prompt")]
        .map((i) => i.value.trim()).filter(Boolean).map((text) => ({ text })),
      provider: model?.model.provider ?? "",
      model: model?.model.model ?? "",
      credentialId: model?.credentialId ?? null,
      toolIds: [...this.$("#agent-tools").querySelectorAll("input:checked")].map((i) => i.value),
    };
  }

  async save() {
    let agent;
    try {
      const body = this.body();
      agent = this.editing ? await this.api.updateAgent(this.editing.id, body) : await this.api.createAgent(body);
    } catch (err) {
      this.$("#agent-error").textContent = err.message;
      return;
    }
    this.closeForm();
    this.dialog.close();
    await this.onSaved(agent);
  }

  async remove(agent) {
    if (!confirm(`Delete the agent "${agent.name}"?`)) return;
    try {
      await this.api.deleteAgent(agent.id);
    } catch (err) {
      this.$("#agent-error").textContent = err.message;
      return;
    }
    await this.list();
    await this.onDeleted(agent);
  }

  closeForm() {
    this.editing = null;
    this.$("#agent-form").hidden = true;
  }
}
