// The approvals page: pending tickets, approve or reject with one click; calls waiting
// for a confirmation, with their hint and an editable payload, confirm or reject.
// The list is read again every REFRESH_MS, so a ticket completed elsewhere (the CLI,
// a webhook, a job) disappears by itself. The token: see page.js.
// The server lists only the tickets the token's roles may see, each with the actions
// they allow: an approver of the app gets the buttons, the ticket's user only sees it.
"use strict";

const REFRESH_MS = 1500;
const decided = new Map(); // call id -> "approved" | "rejected", sent from this page

function age(seconds) {
  if (seconds < 120) return Math.round(seconds) + " s";
  if (seconds < 7200) return Math.round(seconds / 60) + " min";
  if (seconds < 172800) return (seconds / 3600).toFixed(1) + " h";
  return (seconds / 86400).toFixed(1) + " d";
}

function cell(row, className, text) {
  const td = row.insertCell();
  td.className = className;
  if (text !== undefined) td.textContent = text;
  return td;
}

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// The arguments as a form: one row per value, a nested object's or list's values
// indented under its name. Only text: nothing of a value is read as HTML. Secret-named
// values arrive masked (***) from the server.
function argRows(value, depth = 0, into = element("div", "args-form")) {
  const entries = Array.isArray(value) ? value.map((v, i) => ["#" + (i + 1), v]) : Object.entries(value);
  for (const [name, inner] of entries) {
    const row = element("div", "arg");
    row.style.setProperty("--depth", String(depth));
    row.append(element("span", "key", name));
    const nested = inner !== null && typeof inner === "object";
    if (nested && Object.keys(inner).length > 0) {
      row.classList.add("nested");
      row.append(element("span", "value", Array.isArray(inner) ? `${inner.length} item${inner.length === 1 ? "" : "s"}` : ""));
      into.append(row);
      argRows(inner, depth + 1, into);
      continue;
    }
    const shown = nested ? (Array.isArray(inner) ? "(none)" : "(empty)") : inner === null ? "—" : String(inner);
    const cellNode = element("span", "value", shown);
    if (inner === "***") cellNode.classList.add("masked");
    row.append(cellNode);
    into.append(row);
  }
  if (entries.length === 0 && depth === 0) into.append(element("span", "none", "no arguments"));
  return into;
}

// Who asked for what: the app and agent, the tool, the user's message that started it,
// and what the agent said when it made the call.
function story(ticket) {
  const box = element("div", "story");
  const heading = element("div", "what");
  heading.append(element("strong", "tool", ticket.tool));
  // The app, and the agent of it that made the call when it is another than the root.
  const app = ticket.agent === ticket.app_name ? ticket.app_name : `${ticket.app_name} › ${ticket.agent}`;
  const where = element("div", "app", app);
  where.title = `app ${ticket.app_name}, agent ${ticket.agent}`;
  heading.append(where);
  box.append(heading);
  if (ticket.asked) {
    const asked = element("blockquote", "asked");
    asked.append(element("span", "speaker", ticket.user_id + " asked"), element("q", "", ticket.asked));
    box.append(asked);
  }
  if (ticket.agent_said) {
    const said = element("blockquote", "said");
    said.append(element("span", "speaker", ticket.agent + " said"), element("q", "", ticket.agent_said));
    box.append(said);
  }
  return box;
}

function newRow(ticket) {
  const row = document.createElement("tr");
  row.dataset.callId = ticket.call_id;
  cell(row, "request").append(story(ticket));
  cell(row, "args").append(argRows(ticket.args));
  const opened = cell(row, "age");
  opened.title = "opened " + new Date(ticket.created_at * 1000).toLocaleString();
  const who = cell(row, "who");
  const session = element("div", "session", "session " + ticket.session_id);
  session.title = ticket.session_id;
  who.append(element("div", "user", ticket.user_id), session);
  if (ticket.timeline) {
    const link = element("a", "timeline", "timeline ›");
    link.href = ticket.timeline; // built by the server from the ids, relative to this page
    who.append(link);
  }
  const decision = cell(row, "decision");
  if (ticket.kind === "credential") {
    // The user's secret is never typed into this page: it goes through the CLI.
    decision.textContent = "needs the user's credential: toolfleet tickets credential " + ticket.call_id;
    return row;
  }
  if (ticket.kind === "confirmation") {
    confirmationControls(ticket, decision, row);
    return row;
  }
  if (!ticket.actions.includes("approve")) {
    decision.textContent = "your roles may see this ticket, not decide it";
    return row;
  }
  const note = document.createElement("input");
  note.placeholder = "note (optional)";
  note.maxLength = 2000;
  decision.append(note);
  for (const verb of ["approve", "reject"]) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = verb;
    button.dataset.decision = verb;
    button.textContent = verb === "approve" ? "Approve" : "Reject";
    button.addEventListener("click", () => decide(ticket.call_id, verb, note.value, row));
    decision.append(button);
  }
  return row;
}

// A call waiting for a person: its hint, its payload in an editable box, Confirm and
// Reject. Confirmed, the tool gets the payload as edited (tool_context.tool_confirmation).
function confirmationControls(ticket, decision, row) {
  const hint = document.createElement("p");
  hint.className = "hint";
  hint.textContent = ticket.ticket.hint || "confirm this call?";
  decision.append(hint);
  if (!ticket.actions.includes("confirm")) {
    decision.append("your roles may see this call, not confirm it");
    return;
  }
  const payload = document.createElement("textarea");
  payload.className = "payload";
  payload.rows = 4;
  payload.value = JSON.stringify(ticket.ticket.payload ?? null, null, 1);
  decision.append(payload);
  for (const [verb, label, confirmed] of [["confirm", "Confirm", true], ["reject", "Reject", false]]) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = verb === "confirm" ? "approve" : "reject";
    button.dataset.decision = verb;
    button.textContent = label;
    button.addEventListener("click", () => answer(ticket, confirmed, payload.value, row));
    decision.append(button);
  }
}

// The answer names the question shown (asked_again): a call that asked again since
// refuses it (409), and the person sees the new question at the next refresh.
async function answer(ticket, confirmed, payloadText, row) {
  const callId = ticket.call_id;
  let payload;
  try {
    payload = JSON.parse(payloadText);
  } catch (error) {
    showStatus("the payload is not valid JSON: " + error.message, true);
    return;
  }
  row.classList.add("sent");
  for (const button of row.querySelectorAll("button")) button.disabled = true;
  try {
    const asked = { asked_again: ticket.asked_again ?? 0 };
    const body = confirmed ? { confirmed, payload, ...asked } : { confirmed, ...asked };
    await api(`tickets/${encodeURIComponent(callId)}/confirmation`, {
      method: "POST",
      body: JSON.stringify(body),
    });
    const outcome = confirmed ? "confirmed" : "rejected";
    decided.set(callId, outcome);
    showStatus(`${outcome} ${callId}`);
  } catch (error) {
    row.classList.remove("sent");
    for (const button of row.querySelectorAll("button")) button.disabled = false;
    showStatus(error.message, true);
  }
  await refresh();
}

function render(tickets) {
  const showAll = document.getElementById("all").checked;
  const shown = tickets.filter(
    (t) => showAll || t.tool.includes("approval") || t.kind === "confirmation",
  );
  const body = document.querySelector("#tickets tbody");
  const rows = new Map([...body.rows].map((row) => [row.dataset.callId, row]));
  for (const ticket of shown) {
    let row = rows.get(ticket.call_id);
    if (row === undefined) {
      row = newRow(ticket);
      body.append(row);
    }
    rows.delete(ticket.call_id);
    const sent = decided.get(ticket.call_id);
    row.querySelector("td.age").textContent = sent ? sent + ", applying…" : age(ticket.age_s);
  }
  for (const [callId, row] of rows) {
    row.remove(); // completed (here or elsewhere) or filtered out
    decided.delete(callId);
  }
  document.getElementById("empty").hidden = shown.length > 0;
}

async function refresh() {
  try {
    if (!document.getElementById("caller").textContent) await showCaller();
    render(await api("tickets"));
    showStatus("updated " + new Date().toLocaleTimeString());
  } catch (error) {
    showStatus(error.message, true);
  }
}

async function decide(callId, verb, note, row) {
  row.classList.add("sent");
  for (const button of row.querySelectorAll("button")) button.disabled = true;
  try {
    const body = note ? { note } : {};
    await api(`tickets/${encodeURIComponent(callId)}/${verb}`, {
      method: "POST",
      body: JSON.stringify(body),
    });
    const outcome = verb === "approve" ? "approved" : "rejected";
    decided.set(callId, outcome);
    showStatus(`${outcome} ${callId}`);
  } catch (error) {
    row.classList.remove("sent");
    for (const button of row.querySelectorAll("button")) button.disabled = false;
    showStatus(error.message, true);
  }
  await refresh();
}

document.getElementById("all").addEventListener("change", refresh);
startPage(refresh, REFRESH_MS);
