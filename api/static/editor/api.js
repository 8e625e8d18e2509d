// The REST client. The editor signs in once (POST /rest/login with an email and a password, or
// with the api key); the server then
// keeps it signed in with an HttpOnly, SameSite=Strict session cookie that every request carries
// (api/rest/signin.py), so no key is kept in the page, and new tabs and bookmarks work.

export class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

// `mini-n8n up` prints http://host:port/#key=<key>: the key to sign in with, taken out of the
// address bar at once so it is not bookmarked or shared by accident. (Parsed by hand: a key may
// hold "+", which URLSearchParams would turn into a space.)
export function takeKey() {
  const parts = location.hash.slice(1).split("&").filter(Boolean);
  const found = parts.find((part) => part.startsWith("key="));
  if (!found) return "";
  const rest = parts.filter((part) => part !== found).join("&");
  history.replaceState(null, "", location.pathname + location.search + (rest ? `#${rest}` : ""));
  return decode(found.slice(4));
}

function decode(text) {
  try {
    return decodeURIComponent(text);
  } catch {
    return text; // a stray "%": take it as typed
  }
}

export class Api extends EventTarget {
  // Events: "signedout" (a request was refused for want of a valid sign-in: the key changed, or
  // another tab signed out), "wrote" (a change the user asked for went through).
  async request(method, path, body) {
    const headers = { Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const response = await fetch(`/rest${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const data = await response.json().catch(() => ({}));
    if (!response.ok) {
      const signIn = path.startsWith("/login") || path === "/logout";
      if (response.status === 401 && !signIn) this.dispatchEvent(new CustomEvent("signedout"));
      throw new ApiError(response.status, data.message || response.statusText, data);
    }
    if (method !== "GET") this.dispatchEvent(new CustomEvent("wrote", { detail: { method, path } }));
    return data;
  }

  signInStatus() {
    return this.request("GET", "/login/status");
  }

  signIn(apiKey) {
    return this.request("POST", "/login", { apiKey });
  }

  signInAsUser(email, password) {
    return this.request("POST", "/login", { emailOrLdapLoginId: email, password });
  }

  users() {
    return this.request("GET", "/users").then((r) => r.data.items);
  }

  addUser(user) {
    return this.request("POST", "/users", user).then((r) => r.data);
  }

  removeUser(id) {
    return this.request("DELETE", `/users/${encodeURIComponent(id)}`);
  }

  signOut() {
    return this.request("POST", "/logout");
  }

  workflows() {
    return this.request("GET", "/workflows").then((r) => r.data);
  }

  workflow(id) {
    return this.request("GET", `/workflows/${encodeURIComponent(id)}`);
  }

  createWorkflow(workflow) {
    return this.request("POST", "/workflows", workflow);
  }

  saveWorkflow(workflow) {
    return this.request("PUT", `/workflows/${encodeURIComponent(workflow.id)}`, workflow);
  }

  deleteWorkflow(id) {
    return this.request("DELETE", `/workflows/${encodeURIComponent(id)}`);
  }

  nodeTypes() {
    return this.request("GET", "/node-types").then((r) => r.data);
  }

  credentials() {
    return this.request("GET", "/credentials").then((r) => r.data);
  }

  previewExpression(body) {
    return this.request("POST", "/expressions/preview", body);
  }

  setActive(id, active) {
    const action = active ? "activate" : "deactivate";
    return this.request("POST", `/workflows/${encodeURIComponent(id)}/${action}`);
  }

  chat(workflowId, message) {
    return this.request("POST", `/workflows/${encodeURIComponent(workflowId)}/chat`, message);
  }

  executions(workflowId, limit = 50) {
    const query = new URLSearchParams({ workflowId, limit: String(limit) });
    return this.request("GET", `/executions?${query}`).then((r) => r.data);
  }

  execution(id) {
    return this.request("GET", `/executions/${encodeURIComponent(id)}`);
  }

  stop(id) {
    return this.request("POST", `/executions/${encodeURIComponent(id)}/stop`);
  }

  // The tab's push stream: EventSource sends the session cookie as fetch does.
  pushUrl(pushRef) {
    return `/rest/push?${new URLSearchParams({ pushRef })}`;
  }
}
