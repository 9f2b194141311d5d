// What the toolfleet pages share: the caller's token and requests made with it.
// A token given in the link as #token=... (never sent to the server, so never in its
// logs) or ?token=... is kept in this browser's localStorage, removed from the address
// bar, and sent as `Authorization: Bearer`; without one, the page asks for it on the
// first 401 (the #login form), then calls its refresh function again.
"use strict";

const TOKEN_KEY = "toolfleet.token";

function takeTokenFromUrl() {
  const url = new URL(window.location.href);
  const token = new URLSearchParams(url.hash.slice(1)).get("token") ?? url.searchParams.get("token");
  if (token !== null) {
    localStorage.setItem(TOKEN_KEY, token);
    url.searchParams.delete("token");
    url.hash = "";
    history.replaceState(null, "", url); // keep it out of the address bar and history
    document.getElementById("login").hidden = true;
    document.getElementById("caller").textContent = ""; // another token: ask who it is
  }
}

async function api(path, options = {}) {
  const headers = { Accept: "application/json" };
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  const token = localStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = "Bearer " + token;
  const response = await fetch(path, { ...options, headers });
  const body = await response.json().catch(() => ({}));
  if (response.status === 401) {
    document.getElementById("login").hidden = false;
    document.getElementById("caller").textContent = "";
  }
  if (!response.ok) throw new Error(body.detail || response.status + " " + response.statusText);
  return body;
}

function showStatus(text, problem = false) {
  const status = document.getElementById("status");
  status.textContent = text;
  status.classList.toggle("problem", problem);
}

async function showCaller() {
  const me = await api("me");
  const roles = me.roles.length ? me.roles.join(", ") : "no roles: only your own";
  document.getElementById("caller").textContent = me.subject + " (" + roles + ")";
}

// Take a token from the link or the form, then call `refresh` now, on a new token, and
// every `everyMs`.
function startPage(refresh, everyMs) {
  takeTokenFromUrl();
  document.getElementById("login").addEventListener("submit", (event) => {
    event.preventDefault();
    localStorage.setItem(TOKEN_KEY, document.getElementById("token").value);
    document.getElementById("login").hidden = true;
    document.getElementById("caller").textContent = "";
    refresh();
  });
  window.addEventListener("hashchange", () => {
    takeTokenFromUrl();
    refresh();
  });
  refresh();
  setInterval(refresh, everyMs);
}
