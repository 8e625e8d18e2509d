// The node panel's editing half (the NDV's top): rename (connections and references follow),
// delete, the engine's issue for this node, a trigger's URLs, a hint about the node in its
// workflow (hints.js), and the parameter form built from its declaration with the credential
// picker and expression previews.

import { panelHint, streamingParameters } from "./hints.js";
import { parameterForm } from "./params.js";
import { el } from "./util.js";
import { webhookUrls } from "./webhook-urls.js";

export function nodePanel(node, { api, state, notify, close }) {
  const doc = state.doc;
  const name = el("input", { id: "ndv-name", type: "text", "aria-label": "Node name" });
  name.value = node.name;
  name.addEventListener("change", () => {
    try {
      doc.renameNode(node.name, name.value);
    } catch (err) {
      notify(err.message);
      name.value = node.name;
    }
  });
  const remove = el("button", {
    type: "button",
    id: "ndv-delete",
    text: "Delete node",
    onclick: () => {
      close();
      doc.removeNodes([node.name]);
    },
  });
  const head = el("div", { class: "ndv-head" }, el("label", { text: "Name " }, name), remove);
  const issue = state.issues.get(node.name);
  const issueBox = issue ? el("p", { class: "error node-issue", text: issue }) : null;
  const type = state.types.get(node.type);
  if (!type) {
    return el("div", {}, head, el("p", { class: "error", text: `Unknown node type ${node.type}` }));
  }
  const form = parameterForm({
    node,
    type,
    credentials: state.credentials,
    onChange: (params) => doc.setParameters(node.name, params),
    onCredential: (credType, credential) => doc.setCredential(node.name, credType, credential),
    preview: (expression) => previewExpression(api, state, node.name, expression),
  });
  const urls = webhookUrls(node, type, { workflow: state.workflow, dirty: doc.dirty });
  const streamIt = (trigger) => doc.setParameters(trigger.name, streamingParameters(trigger));
  const hint = panelHint(node, state.workflow, streamIt);
  return el("div", {}, head, issueBox, urls, hint, form);
}

// An expression's value against the node's last run (the execution on display), by the engine.
async function previewExpression(api, state, nodeName, expression) {
  const executionId = state.current;
  if (!executionId || !state.workflow.id) return "Preview: run the workflow to see this value.";
  const { result, error } = await api.previewExpression({
    workflowId: state.workflow.id,
    executionId,
    node: nodeName,
    expression,
  });
  if (error) throw new Error(error);
  return `Preview: ${typeof result === "string" ? result : JSON.stringify(result)}`;
}
