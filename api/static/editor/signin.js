// The sign-in page and who is signed in. Two ways in, each to the same HttpOnly session cookie
// (api/rest/signin.py): a person's email and password, or this server's API key (a key in the
// address, the link `make up` prints, signs in first). Nothing is asked of REST before the page
// knows (GET /rest/login/status always answers 200), so a signed-out page makes no failed
// request. /signin?redirect=<path> (where the hosted chat pages and the Chat Hub send a
// signed-out browser) goes back there once signed in; a chat user goes to the Chat Hub.

import { takeKey } from "./api.js";

const $ = (selector) => document.querySelector(selector);
const OWNER = "global:owner";
const CHAT_USER = "global:chatUser";
export const HUB = "/home/chat";

export class SignIn {
  // `onSignedIn()` runs once the page may use REST; `showError(err)` reports anything else.
  constructor({ api, onSignedIn, showError }) {
    this.api = api;
    this.onSignedIn = onSignedIn;
    this.showError = showError;
    this.status = null;
    $("#signin-form").addEventListener("submit", (e) => this.submit(e, () => this.withKey()));
    $("#signin-user-form").addEventListener("submit", (e) => this.submit(e, () => this.asUser()));
  }

  // Whether the page is signed in (and stays: a chat user or a redirect leaves it).
  async check() {
    const key = takeKey();
    try {
      if (key) await this.api.signIn(key);
    } catch (err) {
      this.show(err.status === 401 ? "The key in that link is not this server's API key." : err.message);
      return false;
    }
    try {
      this.status = await this.api.signInStatus();
    } catch (err) {
      this.showError(err);
      return false;
    }
    if (!this.status.signedIn) {
      this.show("");
      return false;
    }
    if (this.leave()) return false;
    this.shown();
    return true;
  }

  show(message) {
    document.body.dataset.signedIn = "false";
    $("#signin").hidden = false;
    $("#signin-error").textContent = message;
    $("#signin-email").focus();
  }

  // The signed-in person may manage users: an owner, or the API key (which stands for one).
  get isOwner() {
    return Boolean(this.status?.signedIn) && (!this.status.user || this.status.user.role === OWNER);
  }

  async submit(event, attempt) {
    event.preventDefault();
    try {
      await attempt();
      this.status = await this.api.signInStatus();
    } catch (err) {
      $("#signin-error").textContent = err.message;
      return;
    }
    for (const input of document.querySelectorAll("#signin input")) input.value = "";
    if (this.leave()) return;
    $("#signin").hidden = true;
    this.shown();
    this.onSignedIn();
  }

  withKey() {
    return this.api.signIn($("#signin-key").value.trim());
  }

  asUser() {
    return this.api.signInAsUser($("#signin-email").value.trim(), $("#signin-password").value);
  }

  // Goes where the browser was sent from, or a chat user to the hub; true when it leaves.
  leave() {
    const back = redirectTarget();
    if (back) {
      location.assign(back);
      return true;
    }
    if (this.status.user?.role === CHAT_USER) {
      location.assign(HUB);
      return true;
    }
    if (location.pathname !== "/") history.replaceState(null, "", `/${location.hash}`);
    return false;
  }

  shown() {
    document.body.dataset.signedIn = "true";
    const user = this.status.user;
    $("#signed-in-as").textContent = user ? user.email : "";
    $("#sign-out").hidden = !user && !this.status.keyRequired;
    $("#open-users").hidden = !this.isOwner;
  }
}

// ?redirect=<a path of this server>, never another site's address.
function redirectTarget() {
  const wanted = new URLSearchParams(location.search).get("redirect");
  if (!wanted) return "";
  const target = new URL(wanted, location.origin);
  if (target.origin !== location.origin) return "";
  return target.pathname + target.search + target.hash;
}
