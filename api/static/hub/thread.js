// The branch shown, as a list of messages: a human message with its files, edit and its
// revisions (‹ 1/2 ›); an answer (one or more AI messages: a tool call's empty step, then the
// text) with regenerate and its retries; a Chat node's question or approval buttons. An empty
// chat greets with the agent and its suggested prompts. All text goes in as text, never HTML.

import { el } from "/static/editor/util.js";
import { iconText } from "./picker.js";
import { approvalOf, isRunning, isToolStep } from "./message.js";

const NEAR_BOTTOM_PX = 80;

export class Thread {
  constructor(root, { api, onEdit, onRegenerate, onPrompt, onError }) {
    this.root = root;
    this.api = api;
    this.onEdit = onEdit;
    this.onRegenerate = onRegenerate;
    this.onPrompt = onPrompt;
    this.onError = onError;
    this.editing = null; // {id, draft}
  }

  show(conversation, agent) {
    this.conversation = conversation;
    this.agent = agent;
    const stick = this.nearBottom();
    const chain = conversation.tree.chain();
    const items = chain.length ? this.items(chain) : [this.greeting(agent)];
    if (conversation.running && !chain.some(isRunning) && !this.waitingAtEnd(chain)) {
      items.push(el("li", { class: "message ai typing", "aria-label": "Answering" }, el("div", { class: "text", text: "…" })));
    }
    this.root.replaceChildren(...items);
    if (stick) this.scrollToEnd();
  }

  // Only one message's text grew (on another branch than the one shown: nothing to do).
  update(messageId) {
    const message = this.conversation.tree.get(messageId);
    const text = this.root.querySelector(`[data-message-id="${messageId}"] > .text`);
    if (!message || !text) return undefined;
    if (approvalOf(message)) return this.show(this.conversation, this.agent);
    const stick = this.nearBottom();
    text.textContent = message.text;
    if (stick) this.scrollToEnd();
  }

  items(chain) {
    const items = [];
    for (let i = 0; i < chain.length; ) {
      if (chain[i].type !== "ai") {
        items.push(this.human(chain[i]));
        i += 1;
        continue;
      }
      let end = i;
      while (end < chain.length && chain[end].type === "ai") end += 1;
      items.push(...this.answer(chain.slice(i, end)));
      i = end;
    }
    return items;
  }

  human(message) {
    const li = item(message);
    if (this.editing?.id === message.id) return this.editor(li, message);
    li.append(el("div", { class: "text", text: message.text }));
    if (message.attachments.length) li.append(this.files(message));
    const running = this.conversation.running;
    li.append(el("div", { class: "message-actions" },
      this.alternatives(message),
      el("button", { type: "button", class: "edit", text: "Edit", disabled: running,
        onclick: () => this.startEdit(message) })));
    return li;
  }

  // An answer's messages; its actions (retries, regenerate) belong to its first message.
  answer(messages) {
    const first = messages[0];
    const last = messages[messages.length - 1];
    const items = messages.map((m) => {
      if (isToolStep(m) && m !== last) return el("li", { class: "step", "data-message-id": m.id, text: "Used a tool" });
      return this.ai(m);
    });
    const done = !this.conversation.running && !messages.some(isRunning);
    const actions = el("div", { class: "message-actions" }, this.alternatives(first));
    if (done && last.status !== "waiting") {
      actions.append(el("button", { type: "button", class: "regenerate", text: "Regenerate",
        onclick: () => this.onRegenerate(first) }));
    }
    items[items.length - 1].append(actions);
    return items;
  }

  ai(message) {
    const li = item(message);
    const approval = approvalOf(message);
    li.append(el("div", { class: "text", text: approval ? approval.text : message.text }));
    if (approval) li.append(this.buttons(message, approval));
    const notes = { cancelled: "Stopped", waiting: approval ? "" : "Waiting for your answer" };
    if (notes[message.status]) li.append(el("div", { class: "note", text: notes[message.status] }));
    return li;
  }

  // A Chat node's approval: a click GETs the button's link (this server's own, only).
  buttons(message, approval) {
    const open = message.status === "waiting" && !this.conversation.clicked.has(message.id);
    const row = el("div", { class: "buttons" });
    for (const button of approval.buttons) {
      const link = sameOrigin(button.link);
      if (!link) continue;
      row.append(el("button", { type: "button", class: button.type === "secondary" ? "secondary" : "primary",
        text: String(button.text ?? ""), disabled: !open,
        onclick: () => this.click(message, link) }));
    }
    return row;
  }

  async click(message, link) {
    this.conversation.clicked.add(message.id);
    this.show(this.conversation, this.agent);
    try {
      const response = await fetch(link);
      if (!response.ok) throw new Error(`The button's answer was refused (${response.status}).`);
    } catch (err) {
      this.conversation.clicked.delete(message.id);
      this.show(this.conversation, this.agent);
      this.onError(err);
    }
  }

  alternatives(message) {
    const all = this.conversation.tree.alternatives(message);
    if (all.length < 2) return null;
    const at = all.findIndex((m) => m.id === message.id);
    const go = (to) => () => {
      this.conversation.tree.focus = all[to].id;
      this.show(this.conversation, this.agent);
    };
    return el("span", { class: "alternatives" },
      el("button", { type: "button", class: "prev", "aria-label": "Previous", text: "‹", disabled: at === 0, onclick: go(at - 1) }),
      el("span", { class: "position", text: `${at + 1}/${all.length}` }),
      el("button", { type: "button", class: "next", "aria-label": "Next", text: "›", disabled: at === all.length - 1, onclick: go(at + 1) }));
  }

  files(message) {
    return el("ul", { class: "files" }, ...message.attachments.map((file, index) =>
      el("li", {}, el("a", { href: this.api.attachmentUrl(this.conversation.id, message.id, index),
        target: "_blank", rel: "noopener", text: file.fileName }))));
  }

  startEdit(message) {
    this.editing = { id: message.id, draft: message.text };
    this.show(this.conversation, this.agent);
    this.root.querySelector(".edit-text")?.focus();
  }

  editor(li, message) {
    const text = el("textarea", { class: "edit-text", "aria-label": "Edit message", rows: 3 });
    text.value = this.editing.draft;
    text.addEventListener("input", () => { this.editing.draft = text.value; });
    const stop = () => {
      this.editing = null;
      this.show(this.conversation, this.agent);
    };
    const save = () => {
      const draft = text.value.trim();
      if (!draft) return;
      stop();
      this.onEdit(message, draft);
    };
    li.classList.add("editing");
    li.append(text, el("div", { class: "message-actions" },
      el("button", { type: "button", class: "cancel-edit", text: "Cancel", onclick: stop }),
      el("button", { type: "button", class: "save-edit", text: "Send", onclick: save })));
    return li;
  }

  greeting(agent) {
    const li = el("li", { class: "greeting" });
    if (!agent) return li;
    li.append(el("div", { class: "agent-name", text: [iconText(agent.icon), agent.name].filter(Boolean).join(" ") }));
    if (agent.description) li.append(el("p", { class: "muted", text: agent.description }));
    const prompts = agent.suggestedPrompts || [];
    if (prompts.length) {
      li.append(el("div", { class: "suggested-prompts" }, ...prompts.map((p) =>
        el("button", { type: "button", class: "suggested-prompt", text: [iconText(p.icon), p.text].filter(Boolean).join(" "),
          onclick: () => this.onPrompt(p.text) }))));
    }
    return li;
  }

  waitingAtEnd(chain) {
    return chain.length > 0 && chain[chain.length - 1].status === "waiting";
  }

  nearBottom() {
    const box = this.root.parentElement;
    return !box || box.scrollHeight - box.scrollTop - box.clientHeight < NEAR_BOTTOM_PX;
  }

  scrollToEnd() {
    const box = this.root.parentElement;
    if (box) box.scrollTop = box.scrollHeight;
  }
}

function item(message) {
  return el("li", { class: `message ${message.type}`, "data-message-id": message.id,
    "data-type": message.type, "data-status": message.status });
}

function sameOrigin(link) {
  try {
    const url = new URL(String(link), location.href);
    return url.origin === location.origin ? url.href : null;
  } catch {
    return null;
  }
}
