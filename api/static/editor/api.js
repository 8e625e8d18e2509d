// The REST client: every call sends the api key as a header (X-N8N-API-KEY).

export const KEY_STORAGE = "mini-n8n-api-key";

export class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

// `mini-n8n up` prints http://host:port/#key=<key>: keep the key for this tab and take it out
// of the address bar, so it is not bookmarked or shared by accident. (Parsed by hand: a key may
// hold "+", which URLSearchParams would turn into a space.)
export function takeKey() {
  const parts = location.hash.slice(1).split("&").filter(Boolean);
  const found = parts.find((part) => part.startsWith("key="));
  if (found) {
    sessionStorage.setItem(KEY_STORAGE, decode(found.slice(4)));
    const rest = parts.filter((part) => part !== found).join("&");
    history.replaceState(null, "", location.pathname + location.search + (rest ? `#${rest}` : ""));
  }
  return sessionStorage.getItem(KEY_STORAGE) || "";
}

function decode(text) {
  try {
    return decodeURIComponent(text);
  } catch {
    return text; // a stray "%": take it as typed
  }
}

export class Api {
  constructor(key) {
    this.key = key;
  }

  async request(method, path, body) {
    const headers = { Accept: "application/json" };
    if (this.key) headers["X-N8N-API-KEY"] = this.key;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const response = await fetch(`/rest${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const data = await response.json().catch(() => ({}));
    if (!response.ok) {
      throw new ApiError(response.status, data.message || response.statusText, data);
    }
    return data;
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

  // EventSource cannot send headers: the push endpoint takes the key as a query parameter.
  pushUrl(pushRef) {
    const query = new URLSearchParams({ pushRef });
    if (this.key) query.set("key", this.key);
    return `/rest/push?${query}`;
  }
}
