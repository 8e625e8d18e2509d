// The Chat Hub's REST client: /rest/chat with n8n's routes and bodies (results come wrapped in
// {"data": …}, errors as {"code", "message"}), and the sign-in routes the page needs. The
// browser's HttpOnly session cookie signs every request in.

import { ApiError } from "/static/editor/api.js";

export { ApiError };

const enc = encodeURIComponent;

export class HubApi extends EventTarget {
  // Events: "signedout" (a request was refused for want of a sign-in: another tab signed out).
  async request(method, path, body) {
    const headers = { Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const response = await fetch(`/rest${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const data = response.status === 204 ? {} : await response.json().catch(() => ({}));
    if (!response.ok) {
      if (response.status === 401) this.dispatchEvent(new CustomEvent("signedout"));
      throw new ApiError(response.status, data.message || response.statusText, data);
    }
    return data;
  }

  async chat(method, path, body) {
    return (await this.request(method, `/chat${path}`, body)).data;
  }

  signInStatus() {
    return this.request("GET", "/login/status");
  }

  signOut() {
    return this.request("POST", "/logout");
  }

  models() {
    return this.chat("POST", "/models", { credentials: {} });
  }

  conversations(limit, cursor) {
    const query = new URLSearchParams({ limit: String(limit) });
    if (cursor) query.set("cursor", cursor);
    return this.chat("GET", `/conversations?${query}`);
  }

  conversation(id) {
    return this.chat("GET", `/conversations/${enc(id)}`);
  }

  rename(id, title) {
    return this.chat("PATCH", `/conversations/${enc(id)}`, { title });
  }

  remove(id) {
    return this.chat("DELETE", `/conversations/${enc(id)}`);
  }

  send(body) {
    return this.chat("POST", "/conversations/send", body);
  }

  edit(sessionId, messageId, body) {
    return this.chat("POST", `/conversations/${enc(sessionId)}/messages/${enc(messageId)}/edit`, body);
  }

  regenerate(sessionId, messageId, body) {
    const path = `/conversations/${enc(sessionId)}/messages/${enc(messageId)}/regenerate`;
    return this.chat("POST", path, body);
  }

  stop(sessionId, messageId) {
    return this.chat("POST", `/conversations/${enc(sessionId)}/messages/${enc(messageId)}/stop`);
  }

  reconnect(sessionId, lastSequence) {
    const query = new URLSearchParams({ lastSequence: String(lastSequence) });
    return this.chat("POST", `/conversations/${enc(sessionId)}/reconnect?${query}`);
  }

  attachmentUrl(sessionId, messageId, index) {
    return `/rest/chat/conversations/${enc(sessionId)}/messages/${enc(messageId)}/attachments/${index}`;
  }

  agents() {
    return this.chat("GET", "/agents");
  }

  createAgent(body) {
    return this.chat("POST", "/agents", body);
  }

  updateAgent(id, body) {
    return this.chat("PATCH", `/agents/${enc(id)}`, body);
  }

  deleteAgent(id) {
    return this.chat("DELETE", `/agents/${enc(id)}`);
  }

  tools() {
    return this.chat("GET", "/tools");
  }

  pushUrl() {
    return "/rest/chat/push";
  }
}
