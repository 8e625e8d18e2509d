// The sidebar's conversations: n8n's cursor pages (18 at a time, "More" for the next), grouped
// by the day of their last message, each renamed or deleted in place. Push events keep it
// current: a title made after the first answer, a message from another tab.

import { el } from "/static/editor/util.js";
import { grouped } from "./dates.js";
import { NEW_CHAT } from "./conversation.js";

const PAGE = 18; // n8n's page size

export class ConversationList {
  constructor(root, more, { api, onOpen, onRenamed, onDeleted, onError }) {
    this.root = root;
    this.moreButton = more;
    this.api = api;
    this.onOpen = onOpen;
    this.onRenamed = onRenamed;
    this.onDeleted = onDeleted;
    this.onError = onError;
    this.sessions = new Map();
    this.changes = 0; // changes made here (a send, a rename, a push event), counted
    this.changed = new Map(); // id -> the count at its last change here
    this.cursor = null;
    this.active = null;
    this.renaming = null;
    more.addEventListener("click", () => this.more().catch(onError));
  }

  async load() {
    const asked = this.changes;
    const page = await this.api.conversations(PAGE);
    const kept = [...this.sessions.values()].filter((s) => this.changed.get(s.id) > asked);
    this.sessions.clear();
    for (const session of kept) this.sessions.set(session.id, session);
    this.take(page, asked);
  }

  async more() {
    if (!this.cursor) return;
    const asked = this.changes;
    this.take(await this.api.conversations(PAGE, this.cursor), asked);
  }

  // A page read after `asked` changes: what changed here since it was asked stays.
  take(page, asked) {
    for (const session of page.data) {
      const mine = this.sessions.get(session.id);
      const newer = mine && this.changed.get(session.id) > asked;
      this.sessions.set(session.id, newer ? { ...session, ...mine } : session);
    }
    this.cursor = page.hasMore ? page.nextCursor : null;
    this.render();
  }

  upsert(session) {
    this.changes += 1;
    this.changed.set(session.id, this.changes);
    this.sessions.set(session.id, { ...this.sessions.get(session.id), ...session });
    this.render();
  }

  forget(id) {
    this.sessions.delete(id);
    this.render();
  }

  setActive(id) {
    this.active = id;
    this.render();
  }

  // A push event of any conversation.
  onPush({ type, data }) {
    const known = this.sessions.get(data.sessionId);
    if (type === "chatHubTitleUpdated" && known) {
      this.upsert({ id: data.sessionId, title: data.title });
    } else if (type === "chatHubHumanMessageCreated" || type === "chatHubMessageEdited") {
      const at = new Date(data.timestamp || Date.now()).toISOString();
      if (known) this.upsert({ id: data.sessionId, lastMessageAt: at });
      else this.load().catch(this.onError); // started in another tab
    }
  }

  render() {
    const groups = grouped([...this.sessions.values()]).map(({ group, sessions }) =>
      el("li", { class: "conversation-group", "data-group": group },
        el("h2", { text: group }),
        el("ul", {}, ...sessions.map((s) => this.item(s)))));
    this.root.replaceChildren(...groups);
    this.moreButton.hidden = !this.cursor;
  }

  item(session) {
    const li = el("li", { class: "conversation", "data-session-id": session.id });
    if (session.id === this.active) li.classList.add("selected");
    if (this.renaming === session.id) {
      li.append(this.renameInput(session));
      return li;
    }
    li.append(
      el("button", { type: "button", class: "open", text: session.title || NEW_CHAT,
        title: session.agentName || "", onclick: () => this.onOpen(session.id) }),
      el("button", { type: "button", class: "rename", "aria-label": "Rename", title: "Rename",
        text: "✎", onclick: () => this.startRename(session.id) }),
      el("button", { type: "button", class: "delete", "aria-label": "Delete", title: "Delete",
        text: "×", onclick: () => this.remove(session) }),
    );
    return li;
  }

  startRename(id) {
    this.renaming = id;
    this.render();
    this.root.querySelector(".rename-input")?.select();
  }

  renameInput(session) {
    let done = false;
    const input = el("input", { class: "rename-input", "aria-label": "Title", maxlength: 256,
      value: session.title || "" });
    const finish = async (save) => {
      if (done) return;
      done = true;
      this.renaming = null;
      const title = input.value.trim();
      if (save && title && title !== session.title) {
        try {
          const data = await this.api.rename(session.id, title);
          this.upsert(data.session);
          this.onRenamed(data.session);
          return;
        } catch (err) {
          this.onError(err);
        }
      }
      this.render();
    };
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter") finish(true);
      if (e.key === "Escape") finish(false);
    });
    input.addEventListener("blur", () => finish(true));
    return input;
  }

  async remove(session) {
    if (!confirm(`Delete "${session.title || NEW_CHAT}"? Its messages and files go with it.`)) return;
    try {
      await this.api.remove(session.id);
    } catch (err) {
      if (err.status !== 404) return this.onError(err);
    }
    this.forget(session.id);
    this.onDeleted(session.id);
  }
}
