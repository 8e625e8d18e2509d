// The owner's page of users: who may sign in, with which role; add one (with a first password:
// mini-n8n sends no mail, so there is no invitation) or remove one. Served by api/rest/users.py.

import { el } from "./util.js";

const ROLES = [
  ["global:member", "Member: the editor and chat"],
  ["global:owner", "Owner: everything, and users"],
  ["global:chatUser", "Chat user: the Chat Hub only"],
];
const ROLE_NAMES = Object.fromEntries(ROLES.map(([value, label]) => [value, label.split(":")[0]]));

export class UsersPage {
  constructor(dialog, { api, notify }) {
    this.dialog = dialog;
    this.api = api;
    this.notify = notify;
    this.list = dialog.querySelector("#users-list");
    this.error = dialog.querySelector("#users-error");
    const role = dialog.querySelector("#users-role");
    role.replaceChildren(...ROLES.map(([value, label]) => el("option", { value, text: label })));
    dialog.querySelector("#users-form").addEventListener("submit", (e) => this.add(e));
    dialog.querySelector("#users-close").addEventListener("click", () => dialog.close());
  }

  async open() {
    this.error.textContent = "";
    if (!this.dialog.open) this.dialog.showModal();
    await this.load();
  }

  async load() {
    let users;
    try {
      users = await this.api.users();
    } catch (err) {
      this.error.textContent = err.message;
      return;
    }
    this.list.replaceChildren(...users.map((user) => this.row(user)));
  }

  row(user) {
    const name = [user.firstName, user.lastName].filter(Boolean).join(" ");
    return el(
      "li",
      { "data-email": user.email },
      el("span", { class: "user-email", text: user.email }),
      el("span", { class: "muted", text: name }),
      el("span", { class: "badge", text: ROLE_NAMES[user.role] || user.role }),
      el("button", { type: "button", class: "remove", onclick: () => this.remove(user), text: "Remove" }),
    );
  }

  async add(event) {
    event.preventDefault();
    const form = event.target;
    const value = (id) => form.querySelector(id).value;
    const user = {
      email: value("#users-email").trim(),
      firstName: value("#users-first-name").trim(),
      password: value("#users-password"),
      role: value("#users-role"),
    };
    try {
      await this.api.addUser(user);
    } catch (err) {
      this.error.textContent = err.message;
      return;
    }
    this.error.textContent = "";
    form.reset();
    this.notify(`Added ${user.email}: they can sign in now.`);
    await this.load();
  }

  async remove(user) {
    try {
      await this.api.removeUser(user.id);
    } catch (err) {
      this.error.textContent = err.message;
      return;
    }
    this.notify(`Removed ${user.email}: their browsers are signed out.`);
    await this.load();
  }
}
