// The Chat Hub's placeholder page: says who is signed in, and signs out.

const $ = (selector) => document.querySelector(selector);

async function rest(method, path) {
  const response = await fetch(`/rest${path}`, { method, headers: { Accept: "application/json" } });
  return response.json().catch(() => ({}));
}

const status = await rest("GET", "/login/status");
if (!status.signedIn) location.assign(`/signin?redirect=${encodeURIComponent(location.pathname)}`);
$("#hub-user").textContent = status.user ? status.user.email : "the api key";

$("#hub-signout").addEventListener("submit", async (event) => {
  event.preventDefault();
  await rest("POST", "/logout");
  location.assign("/signin?redirect=/home/chat");
});
