// The session timeline page: each turn of a session as a Gantt chart of its calls, one
// lane per worker process (start and end from the workers' clocks), and the tickets its
// long-running calls opened, with when and by whom they were completed.
// The session is named in the query (?app=&user=&session=); the server answers only a
// caller that may see it (its own user, or an admin). Read again every REFRESH_MS.
"use strict";

const REFRESH_MS = 2000;

function seconds(value) {
  if (value < 1) return Math.round(value * 1000) + " ms";
  if (value < 120) return value.toFixed(1) + " s";
  if (value < 7200) return Math.round(value / 60) + " min";
  return (value / 3600).toFixed(1) + " h";
}

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// "1 call", "2 calls"; `many` when the plural is not the word and an "s".
function count(n, one, many = one + "s") {
  return `${n} ${n === 1 ? one : many}`;
}

// A bar from `from` to `to` on the axis [start, start + span]: at least MIN_BAR_PX wide
// (see timeline.css), its label inside when it fits, else beside it (fitLabels), and
// the whole story in its tooltip.
function bar(kind, from, to, start, span, label, title) {
  const node = element("div", "bar " + kind);
  node.style.left = ((100 * (from - start)) / span).toFixed(3) + "%";
  node.style.width = ((100 * Math.max(to - from, 0)) / span).toFixed(3) + "%";
  node.title = title;
  node.append(element("span", "label", label));
  return node;
}

// Once laid out: a label that does not fit in its bar goes beside it, on the side with
// room, so a call of a few milliseconds still reads "reimburse", not "re".
function fitLabels(root) {
  for (const label of root.querySelectorAll(".bar > .label")) {
    const node = label.parentElement;
    label.classList.remove("beside", "before");
    if (label.scrollWidth <= node.clientWidth - 2) continue;
    const laneWidth = node.parentElement.clientWidth;
    const roomAfter = laneWidth - (node.offsetLeft + node.offsetWidth);
    label.classList.add(roomAfter >= label.scrollWidth + 8 || roomAfter >= node.offsetLeft ? "beside" : "before");
  }
}

function lane(gantt, name) {
  gantt.append(element("div", "lane-name", name));
  const row = element("div", "lane");
  row.dataset.lane = name;
  gantt.append(row);
  return row;
}

function drawTurn(turn, index, now) {
  const section = element("section", "turn");
  section.dataset.invocationId = turn.invocation_id;
  const start = Math.min(turn.asked_at, ...turn.calls.map((c) => c.started_at));
  // A ticket is drawn to scale, on the calls' axis: from opened to completed (or now).
  const ticketEnd = (t) => Math.max(t.opened_at, t.completed_at ?? now);
  const last = Math.max(
    start + 0.001,
    ...turn.calls.map((c) => c.finished_at),
    ...turn.tickets.map(ticketEnd),
  );
  const end = last + (last - start) * 0.02; // room for the last bars at the edge
  const span = end - start;
  const lanes = [...new Set(turn.calls.map((c) => c.lane))].sort();
  const what = `${count(turn.calls.length, "call")} on ${count(lanes.length, "process", "processes")}`;
  const tickets = turn.tickets.length ? ", " + count(turn.tickets.length, "ticket") : "";
  const heading = element("h2", "", `Turn ${index + 1}: ${what}${tickets} `);
  heading.append(element("small", "", `${seconds(last - start)} · ${new Date(start * 1000).toLocaleString()}`));
  section.append(heading);
  const gantt = element("div", "gantt");
  const rows = new Map(lanes.map((name) => [name, lane(gantt, name)]));
  for (const call of turn.calls) {
    const ran = call.finished_at - call.started_at;
    const retry = call.attempt > 1 ? `, attempt ${call.attempt}` : "";
    const node = bar(call.status, call.started_at, call.finished_at, start, span, call.tool,
      `${call.tool} (${call.call_id}): ${call.status}, ${seconds(ran)} on ${call.lane}${retry}`);
    node.dataset.callId = call.call_id;
    rows.get(call.lane).append(node);
  }
  for (const ticket of turn.tickets) {
    const row = lane(gantt, "ticket · " + ticket.tool);
    const done = ticket.completed_at;
    const label = done === null
      ? `open for ${seconds(now - ticket.opened_at)}`
      : `completed after ${seconds(done - ticket.opened_at)} by ${ticket.completed_by}`;
    const progress = ticket.progress ? `, ${count(ticket.progress, "progress update")}` : "";
    const title = `${ticket.tool} (${ticket.call_id}): ${label}${progress}`;
    const node = bar("ticket" + (done === null ? " open" : ""), ticket.opened_at, ticketEnd(ticket),
      start, span, label + progress, title);
    node.dataset.ticket = ticket.call_id;
    node.dataset.completed = String(done !== null);
    row.append(node);
  }
  const axis = element("div", "axis");
  for (const share of [0, 0.25, 0.5, 0.75, 1]) axis.append(element("span", "", "+" + seconds(share * span)));
  gantt.append(element("div"), axis);
  section.append(gantt);
  return section;
}

function chosen() {
  const query = new URLSearchParams(window.location.search);
  return { app: query.get("app") ?? "", user: query.get("user") ?? "", session: query.get("session") ?? "" };
}

async function refresh() {
  const { app, user, session } = chosen();
  for (const [id, value] of Object.entries({ app, user, session })) {
    const input = document.getElementById(id);
    if (document.activeElement !== input) input.value = value;
  }
  if (!app || !user || !session) {
    showStatus("name a session: app, user and session id");
    return;
  }
  try {
    if (!document.getElementById("caller").textContent) await showCaller();
    const path = ["apps", app, "users", user, "sessions", session, "timeline"].map(encodeURIComponent).join("/");
    const timeline = await api(path);
    const now = Date.now() / 1000;
    const turns = document.getElementById("turns");
    turns.replaceChildren(...timeline.turns.map((t, i) => drawTurn(t, i, now)));
    fitLabels(turns);
    document.getElementById("empty").hidden = timeline.turns.length > 0;
    showStatus("updated " + new Date().toLocaleTimeString());
  } catch (error) {
    document.getElementById("turns").replaceChildren();
    showStatus(error.message, true);
  }
}

document.getElementById("pick").addEventListener("submit", (event) => {
  event.preventDefault();
  const query = new URLSearchParams();
  for (const id of ["app", "user", "session"]) query.set(id, document.getElementById(id).value);
  history.replaceState(null, "", "?" + query);
  refresh();
});
window.addEventListener("resize", () => fitLabels(document.getElementById("turns")));
startPage(refresh, REFRESH_MS);
