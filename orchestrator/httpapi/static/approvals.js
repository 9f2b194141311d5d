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
  return (seconds / 3600).toFixed(1) + " h";
}

function cell(row, className, text) {
  const td = row.insertCell();
  td.className = className;
  if (text !== undefined) td.textContent = text;
  return td;
}

function newRow(ticket) {
  const row = document.createElement("tr");
  row.dataset.callId = ticket.call_id;
  cell(row, "tool", ticket.tool);
  const args = document.createElement("pre");
  args.textContent = JSON.stringify(ticket.args, null, 1);
  cell(row, "args").append(args);
  cell(row, "age");
  cell(row, "who", ticket.session_id + " · " + ticket.user_id);
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
    button.addEventListener("click", () => answer(ticket.call_id, confirmed, payload.value, row));
    decision.append(button);
  }
}

async function answer(callId, confirmed, payloadText, row) {
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
    const body = confirmed ? { confirmed, payload } : { confirmed };
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
