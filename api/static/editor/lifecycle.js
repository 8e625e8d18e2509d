// A workflow's life in the editor: new, save (PUT with its versionId: a stale one gets 409 and
// the page offers to reload, so two tabs never silently overwrite each other), unsaved changes
// marked and confirmed before leaving, delete with confirmation, import from an n8n JSON file or
// paste (an id that exists makes a copy), export (download) in n8n's format.

import { uuid } from "./workflow-doc.js";

const $ = (selector) => document.querySelector(selector);

// A copy is a workflow of its own: no id (the server gives one), a name no other workflow has
// ("X (copy)", "X (copy 2)"...), and new webhook ids, so its chat and webhook URLs do not clash
// with the original's when activated.
function asCopy(workflow, taken) {
  delete workflow.id;
  delete workflow.versionId;
  const base = (workflow.name || "My workflow").replace(/ \(copy(?: \d+)?\)$/, "");
  workflow.name = unique(`${base} (copy)`, taken, (i) => `${base} (copy ${i})`);
  for (const node of workflow.nodes) if (node.webhookId) node.webhookId = uuid();
}

// `wanted`, or the first of next(2), next(3)... that no stored workflow is called.
function unique(wanted, taken, next) {
  let name = wanted;
  for (let i = 2; taken.has(name); i++) name = next(i);
  return name;
}

// What an import did, said once it is open (n8n imports into the open canvas, unsaved, and says
// nothing; here an import is stored at once, so a second one of the same file is a copy).
function importedNotice(name, twin, wanted) {
  if (twin) {
    return (
      `Imported as a copy, "${name}": this workflow is stored already as "${twin.name}" ` +
      "(same id). The copy has its own id and its own chat and webhook URLs."
    );
  }
  if (name !== wanted) return `Imported as "${name}": a workflow called "${wanted}" exists already.`;
  return `Imported "${name}".`;
}

export class Lifecycle {
  constructor(ctx) {
    this.ctx = ctx; // api, state, showError, notify, setDoc, listWorkflows, openWorkflow, opened
    this.showIssue = ctx.showError;
  }

  get doc() {
    return this.ctx.state.doc;
  }

  blank() {
    return {
      name: "My workflow",
      nodes: [],
      connections: {},
      active: false,
      settings: { executionOrder: "v1" },
      pinData: {},
    };
  }

  confirmDiscard() {
    return !this.doc || !this.doc.dirty || window.confirm("Discard the unsaved changes?");
  }

  async save() {
    const { api, listWorkflows } = this.ctx;
    const doc = this.doc;
    const firstSave = !doc.data.id;
    try {
      const saved = firstSave ? await api.createWorkflow(doc.data) : await api.saveWorkflow(doc.data);
      doc.markSaved(saved);
      if (firstSave) {
        history.replaceState(null, "", `#workflow=${encodeURIComponent(saved.id)}`);
        this.ctx.opened(saved.id);
      }
      this.hideConflict();
      await listWorkflows();
      return true;
    } catch (err) {
      if (err.status === 409 && err.body && err.body.code === "versionConflict") this.showConflict(err);
      else this.showIssue(err);
      return false;
    }
  }

  showConflict(err) {
    $("#conflict-message").textContent = err.message;
    $("#conflict").hidden = false;
  }

  hideConflict() {
    $("#conflict").hidden = true;
  }

  newWorkflow() {
    if (!this.confirmDiscard()) return;
    this.ctx.setDoc(this.blank());
  }

  async remove() {
    const { api, listWorkflows, setDoc } = this.ctx;
    const workflow = this.doc.data;
    if (!workflow.id || !window.confirm(`Delete the workflow "${workflow.name}"? This cannot be undone.`)) {
      return;
    }
    try {
      await api.deleteWorkflow(workflow.id);
    } catch (err) {
      this.ctx.showError(err);
      return;
    }
    setDoc(this.blank());
    await listWorkflows();
  }

  exportFile() {
    const workflow = structuredClone(this.doc.data);
    const text = `${JSON.stringify(workflow, null, 2)}\n`;
    const url = URL.createObjectURL(new Blob([text], { type: "application/json" }));
    const link = document.createElement("a");
    link.href = url;
    link.download = `${(workflow.name || "workflow").replace(/[^\w.-]+/g, "_")}.json`;
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  }

  async importText(text) {
    const { api, listWorkflows, openWorkflow } = this.ctx;
    let workflow;
    try {
      workflow = JSON.parse(text);
    } catch {
      this.ctx.notify("The file or pasted text is not JSON.", "error");
      return false;
    }
    if (!workflow || typeof workflow !== "object" || !Array.isArray(workflow.nodes)) {
      this.ctx.notify('Not an n8n workflow: it has no "nodes" list.', "error");
      return false;
    }
    delete workflow.active;
    let saved;
    let said;
    try {
      // An id that is taken (a workflow exported from here, imported again) makes a copy, and a
      // name that is taken a new one: asked first, so no request fails on the way.
      const stored = await api.workflows();
      const taken = new Set(stored.map((w) => w.name));
      const twin = workflow.id ? stored.find((w) => w.id === workflow.id) : null;
      const wanted = workflow.name || "My workflow";
      if (twin) asCopy(workflow, taken);
      else workflow.name = unique(wanted, taken, (i) => `${wanted} (${i})`);
      saved = await api.createWorkflow(workflow);
      said = importedNotice(saved.name, twin, wanted);
    } catch (err) {
      this.showIssue(err);
      return false;
    }
    await listWorkflows();
    await openWorkflow(saved.id, { force: true });
    this.ctx.notify(said);
    return true;
  }

  wire() {
    const dialog = $("#import-dialog");
    $("#new-workflow").addEventListener("click", () => this.newWorkflow());
    $("#save").addEventListener("click", () => this.save());
    $("#export").addEventListener("click", () => this.exportFile());
    $("#delete-workflow").addEventListener("click", () => this.remove());
    $("#conflict-reload").addEventListener("click", () => {
      this.doc.dirty = false;
      this.ctx.openWorkflow(this.doc.data.id, { force: true });
    });
    $("#import").addEventListener("click", () => {
      if (!this.confirmDiscard()) return;
      $("#import-text").value = "";
      $("#import-file").value = "";
      dialog.showModal();
    });
    $("#import-cancel").addEventListener("click", () => dialog.close());
    $("#import-file").addEventListener("change", async (e) => {
      const file = e.target.files[0];
      if (file) $("#import-text").value = await file.text();
    });
    $("#import-form").addEventListener("submit", async (e) => {
      e.preventDefault();
      if (await this.importText($("#import-text").value)) dialog.close();
    });
    window.addEventListener("beforeunload", (e) => {
      if (!this.doc || !this.doc.dirty) return;
      e.preventDefault(); // the browser asks "Leave site?"
      e.returnValue = "";
    });
  }
}
