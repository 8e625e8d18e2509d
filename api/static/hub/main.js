// The Chat Hub page (/home/chat, /home/chat/<conversation id>): wires the REST client, the
// user's push channel, the picker, the conversation list, the thread and the composer around
// the conversation on screen. `window.hub` exposes the live state (for debugging and the tests).

import { Push } from "/static/editor/push.js";
import { AgentEditor } from "./agent-editor.js";
import { Composer } from "./composer.js";
import { Conversation, NEW_CHAT } from "./conversation.js";
import { ConversationList } from "./conversation-list.js";
import { uuid, isUuid } from "./ids.js";
import { approvalOf } from "./message.js";
import { Picker } from "./picker.js";
import { HubApi } from "./rest.js";
import { Thread } from "./thread.js";

const HUB = "/home/chat";
const CHAT_USER = "global:chatUser";
const $ = (selector) => document.querySelector(selector);

const api = new HubApi();
const push = new Push(api.pushUrl());
const picker = new Picker($("#picker"), { api });
const list = new ConversationList($("#conversations"), $("#more-conversations"), {
  api,
  onOpen: (id) => go(id),
  onRenamed: (session) => {
    if (conversation?.id === session.id) conversation.session = session;
    render();
  },
  onDeleted: (id) => conversation?.id === id && go(null),
  onError: showError,
});
const thread = new Thread($("#messages"), {
  api,
  onEdit: (message, text) => edit(message, text).catch(showError),
  onRegenerate: (message) => regenerate(message).catch(showError),
  onPrompt: (text) => composer.send(text),
  onError: showError,
});
const composer = new Composer($("#composer"), { onSend: send, onStop: () => stop().catch(showError) });
const agents = new AgentEditor($("#agents-dialog"), {
  api,
  picker,
  onSaved: async (agent) => {
    await picker.load();
    picker.choose(`custom-agent:${agent.id}`);
    picker.remember();
    go(null);
  },
  onDeleted: () => picker.load().then(render),
});
let conversation = null;

window.hub = { api, push, list, picker, get conversation() { return conversation; } };

// --- the conversation on screen ---------------------------------------------------------------
function go(id) {
  const path = id ? `${HUB}/${id}` : HUB;
  if (location.pathname !== path) history.pushState(null, "", path);
  return route();
}

const NOT_FOUND = "That conversation is not yours, or it was deleted.";

async function route() {
  const id = location.pathname.slice(HUB.length + 1);
  if (!isUuid(id)) return show(new Conversation(api, uuid(), { fresh: true }));
  const opening = new Conversation(api, id);
  show(opening);
  try {
    await opening.load();
  } catch (err) {
    if (conversation !== opening) return;
    showError(err.status === 404 ? new Error(NOT_FOUND) : err);
    return go(null);
  }
  if (conversation === opening && opening.session) picker.showSession(opening.session);
  render();
}

function show(next) {
  conversation = next;
  next.addEventListener("change", (e) => conversation === next && render(e.detail.messageId));
  next.addEventListener("gone", () => {
    if (conversation !== next) return;
    showError(new Error(NOT_FOUND));
    go(null);
  });
  thread.editing = null;
  list.setActive(next.fresh ? null : next.id);
  render();
}

function render(messageId) {
  const c = conversation;
  if (!c) return;
  if (messageId) thread.update(messageId);
  else thread.show(c, picker.current);
  $("#conversation-title").textContent = c.fresh ? "New chat" : c.title;
  const last = c.tree.chain().pop();
  const approval = last && last.status === "waiting" ? approvalOf(last) : null;
  composer.set({
    running: c.running,
    stoppable: Boolean(c.runningMessage()),
    blocked: Boolean(approval?.blockUserInput) && !c.clicked.has(last.id),
    agent: picker.current,
  });
}

// --- what the user does -----------------------------------------------------------------------
function chosen() {
  const agent = picker.current;
  if (!agent) throw new Error("Pick an agent or a model first.");
  const credentials = agent.credentialId ? { openAiApi: { id: agent.credentialId, name: "" } } : {};
  return { model: agent.model, credentials, timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone };
}

async function send(text, files) {
  const c = conversation;
  const how = chosen();
  const messageId = uuid();
  const previous = c.tree.chain().pop()?.id ?? null;
  const shown = files.map(({ fileName, mimeType }) => ({ fileName, mimeType }));
  const fresh = c.fresh;
  c.expect({ id: messageId, type: "human", text, previousMessageId: previous, attachments: shown });
  if (fresh) {
    const at = new Date().toISOString();
    list.upsert({ id: c.id, title: NEW_CHAT, lastMessageAt: at, agentName: picker.current.name });
  }
  try {
    await api.send({ ...how, messageId, sessionId: c.id, message: text, previousMessageId: previous,
      attachments: files, agentName: picker.current.name });
  } catch (err) {
    c.forget(messageId);
    if (fresh) list.forget(c.id);
    throw err;
  }
  if (fresh && c.fresh) {
    c.fresh = false;
    c.session = c.session || { ...list.sessions.get(c.id) };
    if (conversation === c) {
      history.pushState(null, "", `${HUB}/${c.id}`);
      list.setActive(c.id);
    }
    render();
  }
}

async function edit(message, text) {
  const how = chosen();
  const keep = message.attachments.map((_, index) => index);
  await api.edit(conversation.id, message.id, { ...how, messageId: uuid(), message: text,
    newAttachments: [], keepAttachmentIndices: keep });
}

async function regenerate(message) {
  await api.regenerate(conversation.id, message.id, chosen());
}

async function stop() {
  const running = conversation.runningMessage();
  if (running) await api.stop(conversation.id, running.id);
}

// --- the page -----------------------------------------------------------------------------------
function showError(err) {
  $("#notice-text").textContent = err.message || String(err);
  $("#notice").hidden = false;
}

function toSignIn() {
  location.assign(`/signin?redirect=${encodeURIComponent(location.pathname)}`);
}

function onPush(event) {
  const data = event.detail?.data;
  if (!data?.sessionId) return;
  if (conversation && data.sessionId === conversation.id) conversation.receive(event.detail);
  list.onPush(event.detail);
}

async function boot() {
  const status = await api.signInStatus();
  if (!status.signedIn) return toSignIn();
  const user = status.user;
  $("#hub-user").textContent = user ? user.email : "the api key (owner)";
  $("#open-editor").hidden = user?.role === CHAT_USER;
  push.addEventListener("push", onPush);
  push.addEventListener("open", (e) => {
    $("#push-state").dataset.state = "up";
    if (!e.detail.reconnected) return;
    if (conversation && !conversation.fresh) conversation.catchUp();
    list.load().catch(showError);
  });
  push.addEventListener("down", () => { $("#push-state").dataset.state = "down"; });
  push.connect();
  await Promise.all([picker.load(), list.load(), push.ready()]);
  await route();
  document.body.dataset.ready = "true";
}

api.addEventListener("signedout", toSignIn);
picker.addEventListener("change", () => render());
window.addEventListener("popstate", () => route().catch(showError));
$("#new-chat").addEventListener("click", () => go(null).then(() => composer.focus()));
$("#open-agents").addEventListener("click", () => agents.open().catch(showError));
$("#notice-close").addEventListener("click", () => { $("#notice").hidden = true; });
$("#sign-out").addEventListener("click", async () => {
  try {
    await api.signOut();
  } catch (err) {
    return showError(err);
  }
  location.assign(`/signin?redirect=${HUB}`);
});

boot().catch(showError);
