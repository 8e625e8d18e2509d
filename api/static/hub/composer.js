// Where a message is written: its text (Enter sends, Shift+Enter a new line), its files (the
// picker, when the agent takes files), Send, and Stop while an answer is written. A message the
// server refuses stays here, with the server's reason.

import { el } from "/static/editor/util.js";
import { acceptOf, acceptsFiles, readFile } from "./attachments.js";

export class Composer {
  constructor(form, { onSend, onStop }) {
    this.form = form;
    this.onSend = onSend;
    this.onStop = onStop;
    this.files = [];
    this.busy = false;
    this.input = form.querySelector("#prompt");
    this.picker = form.querySelector("#file-input");
    this.attach = form.querySelector("#attach");
    this.sendButton = form.querySelector("#send");
    this.stopButton = form.querySelector("#stop");
    this.chosen = form.querySelector("#chosen-files");
    this.error = form.querySelector("#composer-error");
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      this.send();
    });
    this.input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        this.send();
      }
    });
    this.attach.addEventListener("click", () => this.picker.click());
    this.picker.addEventListener("change", () => this.add([...this.picker.files]));
    this.stopButton.addEventListener("click", () => this.onStop());
  }

  async send(text = this.input.value.trim()) {
    if (!text || this.busy || this.sendButton.disabled) return;
    this.busy = true;
    this.showError("");
    try {
      await this.onSend(text, this.files);
      if (text === this.input.value.trim()) this.input.value = "";
      this.files = [];
      this.renderFiles();
    } catch (err) {
      this.showError(err.message);
    } finally {
      this.busy = false;
    }
  }

  async add(files) {
    this.picker.value = "";
    try {
      this.files.push(...(await Promise.all(files.map(readFile))));
    } catch (err) {
      this.showError(err.message);
    }
    this.renderFiles();
  }

  renderFiles() {
    this.chosen.replaceChildren(...this.files.map((file, index) =>
      el("li", { class: "chosen-file" }, el("span", { text: file.fileName }),
        el("button", { type: "button", class: "remove-file", "aria-label": `Remove ${file.fileName}`, text: "×",
          onclick: () => { this.files.splice(index, 1); this.renderFiles(); } }))));
  }

  // running: an answer is being written; stoppable: it has a message to stop; blocked: an
  // approval waits for a click; agent: what answers (its file rules).
  set({ running, stoppable, blocked, agent }) {
    this.sendButton.disabled = running || blocked || !agent;
    this.input.disabled = blocked;
    this.stopButton.hidden = !running;
    this.stopButton.disabled = !stoppable;
    const files = acceptsFiles(agent?.metadata);
    this.attach.disabled = !files;
    this.attach.title = files ? "Attach files" : "This agent takes no files";
    this.picker.accept = files ? acceptOf(agent.metadata) : "";
  }

  showError(message) {
    this.error.textContent = message;
  }

  focus() {
    this.input.focus();
  }
}
