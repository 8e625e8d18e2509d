// The node view: the node's parameter form (built by main.js from the node type's declaration)
// and its input and output for each run of the execution on display, read from the execution's
// run data (n8n's shape: runData[node] = [{data, inputOverride, source, ...}]).

import { el } from "./util.js";

export class NodeView {
  constructor(dialog, { api, executions, form }) {
    this.dialog = dialog;
    this.api = api;
    this.executions = executions;
    this.form = form; // node -> the parameter panel's element
    this.node = null;
    this.title = dialog.querySelector("#ndv-title");
    this.body = dialog.querySelector("#ndv-body");
    dialog.querySelector("#ndv-close").addEventListener("click", () => dialog.close());
    this.showing = null; // {node, exec} while waiting for the execution to end
    executions.addEventListener("change", (e) => {
      const waiting = this.showing;
      if (waiting && this.dialog.open && e.detail === waiting.exec && waiting.exec.finished) {
        this.open(waiting.node, waiting.exec);
      }
    });
  }

  // The parameter panel again, after the node changed (its name may have changed too).
  refreshForm(node) {
    if (!this.dialog.open || !this.paramsBox) return;
    if (!node) {
      this.dialog.close();
      return;
    }
    this.node = node;
    this.title.textContent = node.name;
    this.paramsBox.replaceChildren(this.form(node));
  }

  async open(node, exec) {
    this.showing = null;
    this.node = node;
    this.title.textContent = node.name;
    this.paramsBox = el("section", { class: "ndv-params" }, this.form(node));
    this.body.replaceChildren(this.paramsBox, el("p", { class: "muted", text: node.type }));
    if (!this.dialog.open) this.dialog.showModal();
    if (!exec) {
      this.body.append(el("p", { class: "hint", text: "Run the workflow to see this node's data." }));
      return;
    }
    if (!exec.finished) {
      this.showing = { node, exec };
      this.body.append(this.summary(node.name, exec));
      this.body.append(el("p", { class: "hint", text: "Data shows when the execution ends." }));
      return;
    }
    let record;
    try {
      record = await this.executions.record(exec, this.api);
    } catch (err) {
      this.body.append(el("p", { class: "error", text: err.message }));
      return;
    }
    this.showRuns(node.name, record);
  }

  summary(name, exec) {
    const state = exec.nodes.get(name);
    const runs = state ? state.runs.filter(Boolean) : [];
    const text = runs.length
      ? runs.map((r, i) => `Run ${i + 1}: ${r.status}, ${r.itemCount} item(s)`).join(" · ")
      : "Not run yet in this execution.";
    return el("p", { class: "summary", text });
  }

  showRuns(name, record) {
    const runs = (record.runData || {})[name] || [];
    if (!runs.length) {
      this.body.append(el("p", { class: "hint", text: "This node did not run in this execution." }));
      return;
    }
    const tabs = el("div", { class: "run-tabs", role: "tablist" });
    const panes = el("div", { class: "run-panes" });
    const select = (index) => {
      for (const [i, tab] of [...tabs.children].entries()) {
        tab.setAttribute("aria-selected", String(i === index));
      }
      panes.replaceChildren(this.run(record, runs[index], index));
    };
    runs.forEach((_, i) => {
      const label = `Run ${i + 1}`;
      tabs.append(el("button", { class: "run-tab", role: "tab", text: label, onclick: () => select(i) }));
    });
    this.body.append(tabs, panes);
    select(0);
  }

  run(record, run, index) {
    const status = run.executionStatus || "unknown";
    const meta = `Run ${index + 1} · ${status} · ${run.executionTime ?? 0} ms`;
    const error = run.error ? el("p", { class: "error", text: run.error.message || String(run.error) }) : null;
    return el(
      "div",
      { class: "run", "data-run-index": index },
      el("p", { class: "muted", text: meta }),
      error,
      el(
        "div",
        { class: "io" },
        pane("Input", "ndv-input", inputItems(record, run)),
        pane("Output", "ndv-output", outputItems(run.data)),
      ),
      consolePane(run.console),
    );
  }
}

// A Code node's console.log lines (n8n sends them to the browser's console in manual runs;
// here they are kept with the run, for every execution).
function consolePane(lines) {
  if (!lines || !lines.length) return null;
  return el(
    "section",
    { class: "pane ndv-console" },
    el("h3", { text: "Console" }),
    el("pre", { class: "json", text: lines.join("\n") }),
  );
}

function pane(title, className, items) {
  const content =
    items === null
      ? el("p", { class: "hint", text: "No input: this node starts the workflow." })
      : el("pre", { class: "json", text: JSON.stringify(items, null, 2) });
  return el("section", { class: `pane ${className}` }, el("h3", { text: title }), content);
}

// A sub-node's input is recorded with its run (inputOverride); a main node's is the output of
// the run of the node before it.
function inputItems(record, run) {
  if (run.inputOverride) return outputItems(run.inputOverride);
  const source = (run.source || [])[0];
  if (!source || !source.previousNode) return null;
  const parents = (record.runData || {})[source.previousNode] || [];
  const parent = parents[source.previousNodeRun || 0];
  const branch = parent && parent.data && parent.data.main && parent.data.main[source.previousNodeOutput || 0];
  return (branch || []).map((item) => item.json);
}

function outputItems(data) {
  if (!data) return [];
  const items = [];
  for (const branches of Object.values(data)) {
    for (const branch of branches || []) for (const item of branch || []) items.push(item.json);
  }
  return items;
}
