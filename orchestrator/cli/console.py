"""Print an invocation's progress for people in a terminal."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from toolfleet.orchestrator.cli import worker_output
from toolfleet.orchestrator.loop.invocation import CallFinished, CallsDispatched, Update
from toolfleet.orchestrator.models.protocol import function_calls, text_of
from toolfleet.orchestrator.sessions.events import Event, answer_of
from toolfleet.shared.messages import CallStatus, PendingCall, ToolResult
from toolfleet.shared.redaction import redact_deep

MARKS = {CallStatus.SUCCESS: "ok", CallStatus.ERROR: "ERROR", CallStatus.PENDING: "pending"}
# Calls of one turn shown a line each (as the model makes them, and as they finish); a
# wider turn's others are counted in one line, so its output stays short.
SHOWN_CALLS = 20


def short(value: Any, limit: int = 80) -> str:
    """`value` as one line of JSON, cut to `limit` characters (ending in "…") if longer."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# Below this much tool time (seconds) a turn's parallel factor says nothing: it is left out.
MEANINGFUL_TOOL_S = 0.01


def plural(n: int, one: str, many: str | None = None) -> str:
    """`1 call`, `2 calls`; `many` where the plural is not `one` + "s"."""
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def turn_line(calls: int, processes: int, wall_s: float, tool_s: float) -> str:
    """A turn's calls, the processes that ran them, wall against tool time, and the
    parallel factor when there is tool time enough for it to mean something."""
    where = plural(processes, "worker process", "worker processes")
    line = (
        f"turn: {plural(calls, 'call')} on {where}, "
        f"wall {wall_s * 1000:.0f} ms vs {tool_s * 1000:.0f} ms of tool time"
    )
    if wall_s > 0 and tool_s >= MEANINGFUL_TOOL_S:
        line += f" (x{tool_s / wall_s:.1f} parallel)"
    return line


@dataclass(frozen=True)
class TurnStats:
    """One model turn whose calls ran on workers, for the `toolfleet demo` summary.

    `calls` ran on `processes` distinct worker processes; `wall_s` is the turn's elapsed time,
    `tool_s` the sum of the calls' own durations (seconds)."""

    calls: int
    processes: int
    wall_s: float
    tool_s: float


@dataclass(frozen=True)
class CompletionStats:
    """A long-running call's final result, posted in the background by `source` (a worker or
    "cli"/"api") `after_s` seconds after the call started."""

    tool: str
    source: str
    after_s: float


class ConsolePrinter:
    """Prints an invocation's updates to `out` as terminal lines, one `show` per update.

    Values named in `secret_arg_names` are masked, at any depth; `turns` and `completions` collect
    what the demo summary reports."""

    def __init__(self, out: TextIO, secret_arg_names: Sequence[str] = ()) -> None:
        self.out = out
        self._secret_names = secret_arg_names
        self._turn_started = 0.0
        self._turn_results: list[ToolResult] = []
        self.turns: list[TurnStats] = []
        self.completions: list[CompletionStats] = []

    def show(self, update: Update) -> None:
        """Print one update: a dispatch, a finished call or a session event; others are ignored.

        A fan-out turn's wall time is measured from its `CallsDispatched`: pass updates in
        order."""
        worker_output.drain()  # what local workers' tools printed before this update
        if isinstance(update, CallsDispatched):
            self._turn_started = time.time()
            self._turn_results = []
            self._line(f"  → dispatched {len(update.calls)} call(s) to the fleet")
        elif isinstance(update, CallFinished):
            self._result(update.result)
        elif isinstance(update, Event):
            self._event(update)

    def _event(self, event: Event) -> None:
        if event.error:
            self._line(f"[{event.author}] stopped: {event.error}")
            return
        for request in event.credential_requests:
            config = request["auth_config"]
            self._line(
                f"[{event.author}] {request['tool']} needs a credential ({config.get('scheme')} "
                f"'{config.get('key')}': {config.get('description') or 'no description'})"
            )
        for asked in event.confirmation_requests:
            payload = short(self._shown(asked.get("payload")), 60)
            self._line(
                f"[{event.author}] {asked['tool']} waits for a confirmation: "
                f"{asked.get('hint') or 'confirm it?'} (payload {payload})"
            )
        if event.credential_requests or event.confirmation_requests:
            return
        if event.progress is not None:
            (record,) = event.calls
            progress = short(self._shown(event.progress))
            self._line(f"  … progress of {record.tool} from {record.worker}: {progress}")
            return
        if event.author == "completion":
            for record, response in zip(event.calls, _responses(event), strict=True):
                age = record.finished_at - record.started_at
                self.completions.append(CompletionStats(record.tool, record.worker, age))
                self._line(
                    f"  ← final result of {record.tool} posted by {record.worker} after "
                    f"{age:.1f} s: {short(self._shown(response))}"
                )
            return
        if event.content is None:
            return
        if event.author == "user":
            self._line(f"[user] {text_of(event.content)}")
            return
        if event.calls:  # function responses: the turn is complete
            self._turn_summary()
            if event.actions.skip_summarization:
                self._line(f"[{event.author}] {answer_of(event)}")
            return
        text = text_of(event.content)
        if text:
            self._line(f"[{event.author}] {text}")
        calls = function_calls(event.content)
        for call in calls[:SHOWN_CALLS]:
            args = redact_deep(call.args or {}, self._secret_names)
            self._line(f"[{event.author}] calls {call.name}({short(args)})")
        if len(calls) > SHOWN_CALLS:
            self._line(f"[{event.author}] … and {len(calls) - SHOWN_CALLS:,} more calls")

    def pending_quietly(self, calls: list[PendingCall]) -> None:
        """Say which calls still run in the background, without the `toolfleet tickets` hints of
        `pending` (the demo's calls are completed by a job, not by the user)."""
        for call in calls:
            self._line(
                f"  waiting for {call.tool} (call {call.call_id}) to finish in the background"
            )

    def pending(self, calls: list[PendingCall]) -> None:
        """List calls waiting on the user, each with the `toolfleet tickets` command that settles it
        (credential, confirm, complete, or approve for tools with "approval" in their name)."""
        for call in calls:
            if call.kind == "credential":
                self._line(f"  waiting for a credential for {call.tool} (call {call.call_id})")
                self._line(f"    supply it: toolfleet tickets credential {call.call_id}")
                continue
            if call.kind == "confirmation":
                self._line(f"  waiting for a confirmation of {call.tool} (call {call.call_id})")
                self._line(f"    confirm it: toolfleet tickets confirm {call.call_id}")
                self._line(f"    or reject:  toolfleet tickets reject {call.call_id}")
                continue
            ticket = short(self._shown(call.ticket), 60)
            self._line(f"  waiting for {call.tool} (call {call.call_id}, ticket {ticket})")
            self._line(
                f"    complete it: toolfleet tickets complete {call.call_id} --json '{{...}}'"
            )
            if "approval" in call.tool:
                self._line(f"    or:          toolfleet tickets approve {call.call_id}")

    def _result(self, result: ToolResult) -> None:
        self._turn_results.append(result)
        if len(self._turn_results) > SHOWN_CALLS:
            return  # counted when the turn is complete
        where = f"{result.worker} pid {result.pid}" if result.pid else result.worker
        self._line(
            f"    {MARKS[result.status]:>7} {result.tool:<24} {result.duration_s * 1000:7.0f} ms  "
            f"on {where}  {short(self._shown(result.response), 60)}"
        )

    def _turn_summary(self) -> None:
        hidden = self._turn_results[SHOWN_CALLS:]
        if hidden:
            counts = Counter(MARKS[r.status] for r in hidden)
            tally = ", ".join(f"{n:,} {mark}" for mark, n in sorted(counts.items()))
            self._line(f"    … and {len(hidden):,} more results ({tally})")
        ran = [r for r in self._turn_results if r.pid]
        if len(ran) < 2:
            return
        wall = time.time() - self._turn_started
        total = sum(r.duration_s for r in ran)
        processes = len({(r.worker, r.pid) for r in ran})
        self.turns.append(TurnStats(len(ran), processes, wall, total))
        self._line("  " + turn_line(len(ran), processes, wall, total))

    def _shown(self, value: Any) -> Any:
        return redact_deep(value, self._secret_names)

    def _line(self, text: str) -> None:
        print(text, file=self.out, flush=True)


def _responses(event: Event) -> list[Any]:
    parts = event.content.parts if event.content is not None else None
    return [p.function_response.response for p in parts or () if p.function_response]
