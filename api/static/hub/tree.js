// A conversation's message tree, read as n8n's Chat Hub front end reads it. Every message names
// its parent (previousMessageId); an edit is a new human message beside the one it revises
// (revisionOfMessageId: the first of them), a regenerated answer a new AI message beside the one
// it retries (retryOfMessageId). Those beside each other are a message's alternatives (‹ 1/2 ›).
//
// The branch shown (`chain`) goes through one message, the focus: from it down, always the
// latest answer; from it up, its parents. Switching to an alternative focuses it; a new message
// is focused as it arrives. Which branch is shown is the page's business: nothing is stored.

export class MessageTree {
  constructor() {
    this.byId = new Map();
    this.focus = null;
  }

  // Adds or updates a message (fields given replace the stored ones).
  put(message) {
    const old = this.byId.get(message.id);
    const merged = old ? { ...old, ...message } : { text: "", ...message };
    this.byId.set(message.id, merged);
    return merged;
  }

  get(id) {
    return id ? this.byId.get(id) : undefined;
  }

  remove(id) {
    this.byId.delete(id);
    if (this.focus === id) this.focus = null;
  }

  get size() {
    return this.byId.size;
  }

  // A message's answers (its children), oldest first.
  children(parentId) {
    const parent = parentId ?? null;
    return [...this.byId.values()]
      .filter((m) => (m.previousMessageId ?? null) === parent)
      .sort(byAge);
  }

  // A message and those beside it: the same parent, the same first revision or retry.
  alternatives(message) {
    const root = rootOf(message);
    return this.children(message.previousMessageId).filter((m) => rootOf(m) === root);
  }

  // The branch shown, from the first message to the last.
  chain() {
    let end = this.get(this.focus) ?? this.latest();
    if (!end) return [];
    for (let next = this.lastChild(end.id); next; next = this.lastChild(end.id)) end = next;
    const chain = [];
    const seen = new Set();
    for (let m = end; m && !seen.has(m.id); m = this.get(m.previousMessageId)) {
      chain.unshift(m);
      seen.add(m.id);
    }
    return chain;
  }

  lastChild(id) {
    const children = this.children(id);
    return children[children.length - 1];
  }

  latest() {
    return [...this.byId.values()].sort(byAge).pop();
  }
}

export function rootOf(message) {
  return message.retryOfMessageId || message.revisionOfMessageId || message.id;
}

// n8n's order: by creation time, then by id.
function byAge(a, b) {
  if (a.createdAt !== b.createdAt) return a.createdAt < b.createdAt ? -1 : 1;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}
