// The "Open chat" panel: each message is a manual run of the workflow; the answer streams in
// as chatChunk push events of that run. The run's id comes back in the POST's response, but its
// events may come first: the execution store keeps them until `track` (see executions.js).
// A workflow with Chat nodes (responseNodes) talks several times in one run: each chatMessage
// push event is a bubble, and while a node waits (`wait`) the next message sent is its reply
// (the server delivers it to the waiting run of this session: same execution id, `resumed`).
// An approval ({"type":"with-buttons"}) shows its buttons; a click GETs the button's link, which
// resumes the run. Tool-step chunks (tool-call-start / tool-call-end, an option of the AI Agent)
// show as one compact line per tool call ("Calculator · 19 * 23 → 437") above the answer.

import { el, randomId } from "./util.js";

const WAITING = "…";
const PUSH_WAIT_MS = 10_000; // a message is not sent while nobody could hear its answer

export class ChatPanel {
  constructor(root, { api, push, pushRef, executions, onStarted }) {
    this.root = root;
    this.api = api;
    this.push = push;
    this.pushRef = pushRef;
    this.executions = executions;
    this.onStarted = onStarted;
    this.list = root.querySelector("#chat-messages");
    this.input = root.querySelector("#chat-input");
    this.sessionLabel = root.querySelector("#chat-session");
    this.workflowId = null;
    this.conversation = null; // the run whose Chat node waits for a reply: {bubble, messages}
    root.querySelector("#chat-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const text = this.input.value.trim();
      if (!text || !this.workflowId) return;
      this.input.value = "";
      this.send(text);
    });
    root.querySelector("#chat-new-session").addEventListener("click", () => this.newSession());
    root.querySelector("#chat-close").addEventListener("click", () => this.close());
  }

  forWorkflow(workflowId) {
    this.workflowId = workflowId;
    this.newSession();
  }

  newSession() {
    this.sessionId = `editor-${randomId(8)}`;
    this.sessionLabel.textContent = this.sessionId;
    this.list.replaceChildren();
    this.conversation = null;
  }

  open() {
    this.root.hidden = false;
    this.input.focus();
  }

  close() {
    this.root.hidden = true;
  }

  async send(text) {
    this.list.append(el("li", { class: "message user" }, el("span", { class: "text", text })));
    if (this.conversation) return this.reply(this.conversation, text);
    const bubble = this.botBubble();
    const workflowId = this.workflowId;
    this.executions.launching += 1;
    this.executions.changed(null);
    let executionId;
    try {
      await withTimeout(this.push.ready(), PUSH_WAIT_MS, "The push connection is down.");
      const body = { sessionId: this.sessionId, chatInput: text, pushRef: this.pushRef };
      ({ executionId } = await this.api.chat(workflowId, body));
    } catch (err) {
      this.executions.launching -= 1;
      this.executions.changed(null);
      this.fail(bubble, err.message);
      return;
    }
    this.executions.launching -= 1;
    this.follow(executionId, workflowId, bubble);
  }

  follow(executionId, workflowId, bubble) {
    bubble.li.dataset.executionId = executionId;
    const conversation = { bubble, messages: 0 };
    const listener = (type, data, exec) => this.onEvent(conversation, type, data, exec);
    this.executions.track(executionId, { workflowId, mine: true, listener });
    this.onStarted(executionId, workflowId);
  }

  botBubble() {
    const text = el("span", { class: "text", text: WAITING });
    const li = el("li", { class: "message bot", "data-state": "waiting" }, text);
    this.list.append(li);
    this.list.scrollTop = this.list.scrollHeight;
    return { li, text, received: "", ended: false };
  }

  async reply(conversation, text) {
    this.conversation = null;
    const bubble = this.botBubble();
    // Before the POST: the resumed run's next message can come over push before its answer does.
    conversation.bubble = bubble;
    const workflowId = this.workflowId;
    const body = { sessionId: this.sessionId, chatInput: text, pushRef: this.pushRef };
    let answer;
    try {
      answer = await this.api.chat(workflowId, body);
    } catch (err) {
      this.fail(bubble, err.message);
      return;
    }
    if (!answer.resumed) {
      this.follow(answer.executionId, workflowId, bubble); // it had stopped waiting: a new run
    }
  }

  onEvent(conversation, type, data, exec) {
    const bubble = conversation.bubble;
    if (type === "chatChunk") this.onChunk(bubble, data.chunk || {});
    else if (type === "chatMessage") this.onChatMessage(conversation, data);
    else if (type === "executionFinished") {
      if (this.conversation === conversation) this.conversation = null;
      if (conversation.messages && data.status === "success" && !bubble.received) {
        bubble.li.remove(); // the Chat nodes said everything; nothing more came
        return;
      }
      // A wait that ended without a reply (expired, stopped): its question stays readable.
      const target = bubble.li.dataset.waiting ? this.botBubble() : bubble;
      this.onFinished(target, data, exec);
    }
  }

  onChatMessage(conversation, data) {
    if (conversation.bubble.li.dataset.waiting) {
      // The wait ended without a typed reply (its time limit passed): the question stays.
      if (this.conversation === conversation) this.conversation = null;
      conversation.bubble = this.botBubble();
    }
    const bubble = conversation.bubble;
    conversation.messages += 1;
    const buttons = withButtons(data.text);
    bubble.received = buttons ? String(buttons.text ?? "") : String(data.text ?? "");
    bubble.text.textContent = bubble.received;
    bubble.li.dataset.state = "done";
    bubble.li.dataset.chatNode = data.node || "";
    if (buttons) this.showButtons(conversation, bubble, buttons.buttons);
    if (data.wait) {
      bubble.li.dataset.waiting = "true"; // answer it: the next message is the reply
      this.conversation = conversation;
    } else {
      conversation.bubble = this.botBubble(); // the run goes on: more may come
    }
    this.list.scrollTop = this.list.scrollHeight;
  }

  // A click answers the waiting node: the run goes on, its next message gets a new bubble.
  showButtons(conversation, bubble, buttons) {
    const row = el("div", { class: "buttons" });
    for (const button of buttons) {
      const b = el("button", {
        type: "button",
        class: button.type === "secondary" ? "secondary" : "primary",
        text: String(button.text ?? ""),
        onclick: async () => {
          if (row.dataset.clicked) return;
          row.dataset.clicked = "pending";
          // Before the request: the resumed run's next message can come over push before its
          // answer does, and must land in the new bubble, not be taken for an expired wait.
          const next = this.answered(conversation, bubble);
          const response = await fetch(String(button.link)).catch((err) => ({ ok: false, err }));
          if (!response.ok) {
            delete row.dataset.clicked;
            this.stillWaiting(conversation, bubble, next);
            bubble.li.dataset.buttonError = response.err ? response.err.message : String(response.status);
            return;
          }
          row.dataset.clicked = "true";
          b.disabled = true;
          for (const other of [...row.children]) if (other !== b) other.remove();
        },
      });
      row.append(b);
    }
    bubble.li.append(row);
  }

  answered(conversation, bubble) {
    if (this.conversation === conversation) this.conversation = null;
    delete bubble.li.dataset.waiting;
    conversation.bubble = this.botBubble();
    return conversation.bubble;
  }

  // The click did not reach the run: its question waits again, and the empty bubble goes.
  stillWaiting(conversation, bubble, next) {
    if (conversation.bubble !== next || next.received) return; // the run went on regardless
    next.li.remove();
    bubble.li.dataset.waiting = "true";
    conversation.bubble = bubble;
    this.conversation = conversation;
  }

  onChunk(bubble, chunk) {
    if (chunk.type === "item" && chunk.content) {
      bubble.received += chunk.content;
      bubble.text.textContent = bubble.received;
      bubble.li.dataset.state = "streaming";
      this.list.scrollTop = this.list.scrollHeight;
    } else if (chunk.type === "error") {
      bubble.error = chunk.content || "The execution failed";
    } else if (chunk.type === "end") {
      bubble.ended = true;
    } else if (chunk.type === "tool-call-start" || chunk.type === "tool-call-end") {
      showToolStep(bubble.li, chunk.type, chunk.metadata || {});
    }
  }

  async onFinished(bubble, data, exec) {
    if (data.status === "success") {
      if (!bubble.received || (data.fromRecord && !bubble.ended)) {
        // Nothing streamed (no Agent, or the stream was missed): show the final output.
        const output = await this.finalOutput(exec).catch(() => "");
        bubble.text.textContent = output || bubble.received || "(no output)";
      }
      bubble.li.dataset.state = "done";
      return;
    }
    if (data.status === "canceled") {
      this.fail(bubble, "The execution was stopped.", bubble.received);
      return;
    }
    this.fail(bubble, bubble.error || data.error || `The execution ${data.status}.`);
  }

  fail(bubble, message, partial = "") {
    bubble.text.textContent = partial ? `${partial} — ${message}` : message;
    bubble.li.dataset.state = "error";
  }

  async finalOutput(exec) {
    const record = await this.executions.record(exec, this.api);
    const runs = (record.runData || {})[record.lastNodeExecuted] || [];
    const last = runs[runs.length - 1];
    const json = last && last.data && last.data.main && last.data.main[0] && last.data.main[0][0];
    if (!json) return "";
    const value = json.json || {};
    if (typeof value.output === "string") return value.output;
    if (typeof value.text === "string") return value.text;
    return JSON.stringify(value);
  }
}

// One compact line per tool call, above the answer: "Calculator · 19 * 23 → 437" (an ellipsis
// while it runs); start and end are paired by the call's id.
function showToolStep(li, kind, meta) {
  let steps = li.querySelector(".tool-steps");
  if (!steps) {
    steps = el("div", { class: "tool-steps" });
    li.prepend(steps);
  }
  const id = String(meta.toolCallId ?? "");
  let line = [...steps.children].find((x) => x.dataset.toolCallId === id && !x.dataset.done);
  if (!line) {
    line = el("div", { class: "tool-step", "data-tool-call-id": id });
    steps.append(line);
  }
  if (kind === "tool-call-start") line.dataset.input = toolInputText(meta.toolInput);
  const head = `${String(meta.toolNode || meta.toolName || "tool")} · ${line.dataset.input ?? ""}`;
  if (kind === "tool-call-start") {
    line.textContent = `${head} …`;
    return;
  }
  line.dataset.done = "true";
  if (meta.toolError != null) {
    line.dataset.error = "true";
    line.textContent = `${head} → error: ${meta.toolError}`;
  } else {
    line.textContent = `${head} → ${meta.toolOutput ?? ""}`;
  }
}

// A tool's input as a person reads it: the text of {"input": ...}, else the JSON.
function toolInputText(raw) {
  try {
    const args = typeof raw === "string" ? JSON.parse(raw) : raw;
    if (args && typeof args === "object" && Object.keys(args).length === 1 && "input" in args) {
      return typeof args.input === "string" ? args.input : JSON.stringify(args.input);
    }
    return JSON.stringify(args);
  } catch {
    return String(raw ?? "");
  }
}

function withButtons(text) {
  try {
    const body = JSON.parse(String(text));
    if (body && body.type === "with-buttons" && Array.isArray(body.buttons)) return body;
  } catch {
    // plain text
  }
  return null;
}

function withTimeout(promise, ms, message) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
