// Hints: what the editor says about a node because of the rest of the workflow, where it matters
// (n8n's node hints). One today: an Agent that would stream its answer behind a Chat Trigger that
// answers "When Last Node Finishes" — n8n's default for a new Chat Trigger, and ours — so the
// chat URL and the hosted page get each answer whole, while the editor's own chat panel streams
// either way. n8n's Agent declares a hint for this ("You are using streaming responses. Make sure
// to set the response mode to "Streaming Response" on the connected trigger node."), but its
// condition reads `$parameter["enableStreaming"]`, which the Agent keeps under Options, so n8n
// 2.41.1 never shows it; here it shows on the canvas beside the Agent, in the Agent's panel and
// in the trigger's, with a button that sets the trigger to Streaming.

import { el } from "./util.js";

export const CHAT_TRIGGER = "@n8n/n8n-nodes-langchain.chatTrigger";
const AGENT = "@n8n/n8n-nodes-langchain.agent";
const WHOLE = "lastNode"; // the reply is the last node's output, written once the run is done
const WHOLE_NAME = "“When Last Node Finishes”"; // as the Response Mode option names it

// The response mode a Chat Trigger answers in (engine/nodes/chat_trigger.py, chat_settings): its
// option, else Streaming for a Chat Hub agent (n8n's default there), else When Last Node Finishes.
export function responseMode(trigger) {
  const params = trigger.parameters || {};
  const given = params.options && params.options.responseMode;
  return given || (params.availableInChat === true ? "streaming" : "lastNode");
}

// [{trigger, agent}]: each Agent that streams (Options → Enable Streaming, on unless turned off)
// downstream of a Chat Trigger that answers whole.
export function wholeAnswers(workflow) {
  const nodes = workflow.nodes || [];
  const byName = new Map(nodes.map((n) => [n.name, n]));
  const found = [];
  for (const trigger of nodes) {
    if (trigger.type !== CHAT_TRIGGER || trigger.disabled || responseMode(trigger) !== WHOLE) continue;
    for (const name of downstream(workflow.connections || {}, trigger.name)) {
      const agent = byName.get(name);
      const streams = agent && ((agent.parameters || {}).options || {}).enableStreaming !== false;
      if (agent && agent.type === AGENT && !agent.disabled && streams) found.push({ trigger, agent });
    }
  }
  return found;
}

// What the canvas shows beside each such Agent: name -> {short, text, trigger}.
export function canvasHints(workflow) {
  const hints = new Map();
  for (const { trigger, agent } of wholeAnswers(workflow)) {
    hints.set(agent.name, {
      short: "⚠ answer not streamed",
      text:
        `“${trigger.name}” has Response Mode ${WHOLE_NAME}: its chat gets this answer ` +
        "whole, not streamed. Click to open the trigger.",
      trigger: trigger.name,
    });
  }
  return hints;
}

// The hint at the top of `node`'s panel, or null. `streamIt(trigger)` sets a trigger to Streaming.
export function panelHint(node, workflow, streamIt) {
  const pairs = wholeAnswers(workflow);
  if (node.type === CHAT_TRIGGER) {
    const agents = pairs.filter((p) => p.trigger.name === node.name).map((p) => `“${p.agent.name}”`);
    if (!agents.length) return null;
    return box(
      `Response Mode is ${WHOLE_NAME} (the default, in n8n too): the chat page and the chat ` +
        `URL get ${agents.join(", ")}'s answer whole once the workflow ends, not word by word; ` +
        "the editor's chat streams either way. To stream it, set Options → Response Mode to " +
        "“Streaming”.",
      "Use Streaming",
      () => streamIt(node),
    );
  }
  const pair = pairs.find((p) => p.agent.name === node.name);
  if (!pair) return null;
  return box(
    "You are using streaming responses (Options → Enable Streaming), but the connected trigger " +
      `“${pair.trigger.name}” has Response Mode ${WHOLE_NAME}, so its chat gets this ` +
      "answer whole. Set the trigger's Options → Response Mode to “Streaming” to stream it.",
    `Set “${pair.trigger.name}” to Streaming`,
    () => streamIt(pair.trigger),
  );
}

// The trigger's parameters with Options → Response Mode set to Streaming.
export function streamingParameters(trigger) {
  const params = structuredClone(trigger.parameters || {});
  params.options = { ...(params.options || {}), responseMode: "streaming" };
  return params;
}

function box(text, action, onclick) {
  return el(
    "div",
    { class: "node-hint", role: "note", "data-hint": "streaming" },
    el("p", { text }),
    el("button", { type: "button", class: "hint-action", text: action, onclick }),
  );
}

// Names of the nodes reached from `start` over main connections.
function downstream(connections, start) {
  const seen = new Set();
  const queue = [start];
  while (queue.length) {
    const name = queue.shift();
    for (const targets of (connections[name] || {}).main || []) {
      for (const target of targets || []) {
        if (seen.has(target.node) || target.node === start) continue;
        seen.add(target.node);
        queue.push(target.node);
      }
    }
  }
  return seen;
}
