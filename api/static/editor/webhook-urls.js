// The URLs a trigger listens on, where n8n shows them: at the top of its node panel, each with a
// copy button, and a word on whether it answers now. The paths are the engine's: a Chat
// Trigger's `path` parameter, else <webhookId>/chat (engine/nodes/chat_trigger.py, chat_path); a
// Webhook's `path`, else its webhookId (engine/nodes/webhook.py, webhook_path). They are shown
// for the node as edited, on the origin this page was loaded from.

import { withDefaults } from "./node-types.js";
import { el } from "./util.js";

const CHAT_TRIGGER = "@n8n/n8n-nodes-langchain.chatTrigger";
const WEBHOOK = "n8n-nodes-base.webhook";
const COPIED_MS = 2000;

// The section for `node`, or null for a node that listens on no URL.
export function webhookUrls(node, type, { workflow, dirty }) {
  const params = withDefaults(type.properties, node.parameters || {});
  const context = { active: Boolean(workflow.active && workflow.id), dirty };
  if (node.type === CHAT_TRIGGER) return chatSection(node, params, context);
  if (node.type === WEBHOOK) return webhookSection(node, params, context);
  return null;
}

function chatSection(node, params, { active, dirty }) {
  const path = trimSlashes(params.path) || (node.webhookId ? `${node.webhookId}/chat` : "");
  const url = `${location.origin}/webhook/${path}`;
  const isPublic = Boolean(params.public);
  const hosted = isPublic && (params.mode || "hostedChat") === "hostedChat";
  const notes = [];
  if (!isPublic) {
    notes.push(
      "This chat is not public: its URL answers 404 to everyone. Turn on “Make Chat Publicly " +
        "Available” to open it; until then, try it with Open chat.",
    );
  } else if (!active) {
    notes.push("Chat will be live at the URL above once you activate this workflow.");
  } else {
    notes.push(hosted ? "Live: open the chat page, or POST messages to this URL." : "Live: POST messages to this URL.");
  }
  if (isPublic && !hosted) notes.push("Embedded chat: it has no chat page of its own; use @n8n/chat or POST to it.");
  if (isPublic && params.authentication === "basicAuth") notes.push("It asks for a login (basic auth).");
  if (active && dirty) notes.push("Unsaved changes apply once you save.");
  const link = hosted
    ? el("a", { class: "chat-page", href: url, target: "_blank", rel: "noopener noreferrer", text: "Open the chat page" })
    : null;
  return section("chat", "Chat URL", [urlRow("chat", null, "", url), link], notes);
}

function webhookSection(node, params, { active, dirty }) {
  const path = trimSlashes(params.path) || node.webhookId || "";
  const method = String(params.httpMethod || "GET").toUpperCase();
  const url = `${location.origin}/webhook/${path}`;
  const notes = [
    active
      ? "Live: the production URL answers now; each call is an execution in the list."
      : "The production URL answers once you activate this workflow.",
    "No test URL: mini-n8n has no “Listen for test event”; call the production URL of the " +
      "active workflow instead.",
  ];
  if (active && dirty) notes.push("Unsaved changes apply once you save.");
  return section("webhook", "Webhook URLs", [urlRow("production", "Production URL", method, url)], notes);
}

function section(kind, title, rows, notes) {
  return el(
    "section",
    { class: "webhook-urls", "data-kind": kind },
    el("h3", { text: title }),
    ...rows,
    ...notes.map((text) => el("p", { class: "url-note muted", text })),
  );
}

function urlRow(kind, label, method, url) {
  const copy = el("button", { type: "button", class: "copy-url", text: "Copy" });
  copy.addEventListener("click", async () => {
    copy.textContent = (await copyText(url, copy.parentElement)) ? "Copied" : "Copy failed: select the URL";
    setTimeout(() => (copy.textContent = "Copy"), COPIED_MS);
  });
  return el(
    "div",
    { class: "url-row", "data-url": kind },
    label ? el("span", { class: "url-label", text: label }) : null,
    method ? el("span", { class: "url-method", text: method }) : null,
    el("code", { class: "url", text: url }),
    copy,
  );
}

// The clipboard API needs a secure context (https, or localhost); over plain http elsewhere the
// older selection copy still works (from inside the panel: outside an open modal dialog the page
// is inert).
async function copyText(text, near) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const area = el("textarea", { class: "copy-buffer", readonly: true });
    area.value = text;
    near.append(area);
    area.select();
    const done = document.execCommand("copy");
    area.remove();
    return done;
  }
}

function trimSlashes(value) {
  return String(value ?? "").replace(/^\/+|\/+$/g, ""); // Python's strip("/")
}
