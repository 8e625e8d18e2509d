// The conversation on screen: its record, its message tree, and the push events that change
// them, applied once each and in order.
//
// Every event of a conversation carries its number (sequenceNumber, one count per conversation,
// on the server). An event at or below the last one applied is a repeat and is dropped; one past
// the next number means some were missed (the push channel dropped): the page asks
// `POST …/reconnect?lastSequence=n` for every event after n (begin and end included, from any api
// process) and applies them in order with those held meanwhile.
//
// Opening a conversation reads it, then every event it still keeps: an answer being written is
// rebuilt from its chunks, so none is shown twice, and the events held while reading follow.
// When an execution ends, the conversation is read again, as n8n's page does: what the server
// wrote without an event (a question answered, a whole last-node answer) shows then.
// A catch-up answered 404 means the conversation is gone (deleted, or Redis came back empty):
// the page is told ("gone") and asks no more, rather than show an answer forever being written.

import { fromDto, isRunning } from "./message.js";
import { MessageTree } from "./tree.js";

export const NEW_CHAT = "New Chat";
const RETRY_MS = 1000; // a failed catch-up asks again after this

export class Conversation extends EventTarget {
  // Events: "change" (detail.messageId alone: only that message's text grew), "gone".
  constructor(api, id, { fresh = false } = {}) {
    super();
    this.api = api;
    this.id = id;
    this.fresh = fresh; // made on this page, nothing on the server yet
    this.session = null;
    this.tree = new MessageTree();
    this.lastSequence = 0;
    this.running = false; // an execution is answering (ExecutionBegin until ExecutionEnd)
    this.live = new Set(); // AI messages whose text this page builds from chunks
    this.held = fresh ? null : []; // events that came while it loads or catches up
    this.clicked = new Set(); // approvals answered from this page
    this.catchUps = 0; // how many times it asked for missed events (for the tests)
    this.replaying = false;
    this.catching = false;
  }

  get title() {
    return this.session?.title || NEW_CHAT;
  }

  async load() {
    const data = await this.api.conversation(this.id);
    this.session = data.session;
    for (const dto of Object.values(data.conversation.messages)) this.tree.put(fromDto(dto));
    for (const message of this.tree.byId.values()) if (isRunning(message)) this.live.add(message.id);
    const caught = await this.api.reconnect(this.id, 0);
    this.replaying = true; // what the read showed already: no second read at an execution's end
    for (const event of caught.pendingEvents || []) this.apply(event);
    this.replaying = false;
    this.lastSequence = Math.max(this.lastSequence, caught.lastSequenceNumber || 0);
    this.running = this.running || Boolean(caught.hasActiveStream);
    this.release();
  }

  // A push event of this conversation.
  receive(event) {
    if (this.held) {
      this.held.push(event);
      return;
    }
    const seq = event.data.sequenceNumber;
    if (seq <= this.lastSequence) return;
    if (seq > this.lastSequence + 1) {
      this.held = [event];
      this.catchUp();
      return;
    }
    this.applyNumbered(event);
  }

  // Every event after the last one applied, from the server's kept events.
  async catchUp() {
    this.held = this.held || [];
    if (this.catching) return; // its answer is followed by what is held, gaps asked again
    this.catching = true;
    this.catchUps += 1;
    let caught;
    try {
      caught = await this.api.reconnect(this.id, this.lastSequence);
    } catch (err) {
      if (err.status === 404) return this.lose();
      setTimeout(() => this.catchUp(), RETRY_MS); // still holding what came meanwhile
      return;
    } finally {
      this.catching = false;
    }
    for (const event of caught.pendingEvents || []) {
      if (event.data.sequenceNumber > this.lastSequence) this.applyNumbered(event);
    }
    this.release();
  }

  // The server no longer has it: nothing is held, running or being written any more.
  lose() {
    this.held = null;
    this.running = false;
    this.live.clear();
    this.dispatchEvent(new CustomEvent("gone"));
  }

  // Applies the events held, in order; a gap left after them asks again.
  release() {
    const held = (this.held || []).sort((a, b) => a.data.sequenceNumber - b.data.sequenceNumber);
    this.held = null;
    for (const [index, event] of held.entries()) {
      const seq = event.data.sequenceNumber;
      if (seq <= this.lastSequence) continue;
      if (seq > this.lastSequence + 1) {
        this.held = held.slice(index);
        this.catchUp();
        break;
      }
      this.applyNumbered(event);
    }
    this.changed();
  }

  applyNumbered(event) {
    this.lastSequence = event.data.sequenceNumber;
    const only = this.apply(event);
    if (!this.held) this.changed(only);
  }

  // One event's change; returns the message id when only its text grew.
  apply({ type, data }) {
    const handler = HANDLERS[type];
    return handler ? handler(this, data) : undefined;
  }

  changed(messageId) {
    this.dispatchEvent(new CustomEvent("change", { detail: { messageId } }));
  }

  // The server's copy, once an execution ended: messages still being written stay as they are.
  async refresh() {
    const data = await this.api.conversation(this.id);
    this.session = data.session;
    for (const dto of Object.values(data.conversation.messages)) {
      const mine = this.tree.get(dto.id);
      if (mine && (isRunning(mine) || dto.status === "running")) continue;
      this.tree.put(fromDto(dto));
    }
    this.changed();
  }

  // A message this page sent, shown before the server's event for it.
  expect(message) {
    this.tree.put({ status: "success", createdAt: Date.now(), attachments: [], ...message });
    this.tree.focus = message.id;
    this.changed();
  }

  forget(messageId) {
    this.tree.remove(messageId);
    this.changed();
  }

  runningMessage() {
    return this.tree.chain().filter(isRunning).pop() ?? null;
  }
}

function human(conversation, data, extra) {
  const known = conversation.tree.get(data.messageId);
  conversation.tree.put({
    id: data.messageId,
    type: "human",
    text: data.content,
    status: "success",
    attachments: data.attachments || [],
    ...(known ? {} : { createdAt: data.timestamp }),
    ...extra,
  });
  conversation.tree.focus = data.messageId;
}

const HANDLERS = {
  chatHubHumanMessageCreated(c, data) {
    human(c, data, { previousMessageId: data.previousMessageId ?? null });
  },
  chatHubMessageEdited(c, data) {
    const revised = c.tree.get(data.revisionOfMessageId);
    human(c, data, {
      previousMessageId: revised ? revised.previousMessageId : null,
      revisionOfMessageId: data.revisionOfMessageId,
    });
  },
  chatHubExecutionBegin(c) {
    c.running = true;
  },
  chatHubStreamBegin(c, data) {
    c.running = true;
    const known = c.tree.get(data.messageId);
    if (known && !isRunning(known)) return undefined; // the server's final copy is here already
    c.tree.put({
      id: data.messageId,
      type: "ai",
      name: "AI",
      text: "", // its chunks follow
      status: "running",
      createdAt: known ? known.createdAt : data.timestamp,
      previousMessageId: data.previousMessageId ?? null,
      retryOfMessageId: data.retryOfMessageId ?? null,
      revisionOfMessageId: null,
      executionId: data.executionId,
      attachments: [],
    });
    c.live.add(data.messageId);
    c.tree.focus = data.messageId;
    return undefined;
  },
  chatHubStreamChunk(c, data) {
    const message = c.tree.get(data.messageId);
    if (!message || !c.live.has(data.messageId)) return undefined;
    message.text += data.content;
    return data.messageId;
  },
  chatHubStreamError(c, data) {
    const message = c.tree.get(data.messageId);
    if (message && !message.text) message.text = data.error;
    if (message) message.error = data.error;
  },
  chatHubStreamEnd(c, data) {
    const message = c.tree.get(data.messageId);
    if (message) message.status = data.status;
    c.live.delete(data.messageId);
  },
  chatHubExecutionEnd(c, data) {
    c.running = false;
    for (const id of c.live) {
      const message = c.tree.get(id);
      if (message && isRunning(message)) message.status = data.status;
    }
    c.live.clear();
    if (!c.replaying) c.refresh().catch(() => {}); // a failed read: the next end reads again
  },
  chatHubTitleUpdated(c, data) {
    c.session = { ...(c.session || { id: c.id }), title: data.title };
  },
};
