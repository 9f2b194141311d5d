"""An invocation's updates as Server-Sent Events.

Event names and their data (JSON, each with `session_id`):
- `event`: a session event as stored, with `kind` (user, model, responses, completion,
  progress, credential, error), `author`, `text` and the whole `event` (secret
  arguments masked);
- `calls`: the calls of a turn left for the fleet, each with its `pool` and arguments;
- `result`: one call's result: `status`, `worker`, `pid`, `duration_s`, `response`;
- `pending`: the invocation ended with these tickets open;
- `answer`: the invocation ended; `text` is the agent's last answer (its text, or
  the tools' responses when they skip summarization);
- `error`: the invocation failed, or the stream is closed by the server.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.agent import Agent
from orchestrator.httpapi.wire import Ticket
from orchestrator.loop import CallFinished, CallsDispatched, Update
from orchestrator.model import function_calls, text_of
from orchestrator.sessions import Event, answer_of
from shared.celery_config import tool_pool
from shared.config import Settings
from shared.messages import PendingCall
from shared.redaction import redact_args

SseMessage = tuple[str, dict[str, Any]]
EVENT_NAMES = ("event", "calls", "result", "pending", "answer", "error")


def encode(name: str, data: dict[str, Any], event_id: int) -> bytes:
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    return f"event: {name}\nid: {event_id}\ndata: {payload}\n\n".encode()


PING = b": ping\n\n"


def event_json(event: Event, secret_names: Sequence[str]) -> dict[str, Any]:
    """An Event as JSON with the arguments of its function calls masked."""
    data = event.model_dump(mode="json", exclude_none=True)
    for part in (data.get("content") or {}).get("parts") or ():
        call = part.get("function_call")
        if call and isinstance(call.get("args"), dict):
            call["args"] = redact_args(call["args"], secret_names)
    return data


def event_kind(event: Event) -> str:
    if event.error:
        return "error"
    if event.credential_requests:
        return "credential"
    if event.author == "user":
        return "user"
    if event.author == "completion":
        return "progress" if event.progress is not None else "completion"
    if event.content is not None and event.content.role == "model":
        return "model"
    return "responses"


def ends_invocation(event: Event, agent: Agent) -> bool:
    """Whether the loop returns after yielding this event (orchestrator.loop's exits).

    Needed for invocations the completions listener resumes, whose end is not
    signalled otherwise: a model reply without calls, a turn whose tools skip
    summarization or whose root agent escalates, a turn parked until the user
    supplies a credential, and the max_steps stop.
    """
    if event.author in ("user", "completion"):
        return False
    if event.credential_requests:
        return True
    if event.error:
        return event.content is None and event.error.startswith("stopped after max_steps")
    content = event.content
    if content is None:
        return False
    if content.role == "model":
        return not function_calls(content)
    if event.actions.skip_summarization:
        return True
    author = agent.find_agent(event.author)
    return event.actions.escalate and (author is None or author.parent is None)


@dataclass
class UpdateWriter:
    """Turns one session's updates into SSE messages."""

    session_id: str
    agent: Agent
    settings: Settings
    last_text: str = ""
    last_error: str | None = None
    _pools: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._pools = {t.name: tool_pool(t, self.settings) for t in self.agent.all_tools()}

    def messages(self, update: Update) -> list[SseMessage]:
        if isinstance(update, CallsDispatched):
            calls = [
                {
                    "call_id": c.call_id,
                    "tool": c.tool,
                    "pool": self._pools.get(c.tool, self.settings.default_pool),
                    "args": redact_args(c.args, self.settings.secret_arg_names),
                }
                for c in update.calls
            ]
            return [("calls", self._with_ids(update.invocation_id, calls=calls))]
        if isinstance(update, CallFinished):
            r = update.result
            return [
                (
                    "result",
                    self._with_ids(
                        update.invocation_id,
                        call_id=r.call_id,
                        tool=r.tool,
                        status=r.status.value,
                        worker=r.worker,
                        pid=r.pid,
                        attempt=r.attempt,
                        duration_s=round(r.duration_s, 6),
                        response=r.response,
                    ),
                )
            ]
        kind = event_kind(update)
        if answer_of(update):
            self.last_text = answer_of(update)
        if update.error:
            self.last_error = update.error
        data = self._with_ids(
            update.invocation_id,
            kind=kind,
            author=update.author,
            text=text_of(update.content),
            event=event_json(update, self.settings.secret_arg_names),
        )
        return [("event", data)]

    def ending(
        self, invocation_id: str, pending: Sequence[PendingCall], error: str | None = None
    ) -> list[SseMessage]:
        """`pending` (if any tickets are open) then `answer`."""
        out: list[SseMessage] = []
        if pending:
            names = self.settings.secret_arg_names
            tickets = [Ticket.of(c, names).model_dump(mode="json") for c in pending]
            out.append(("pending", {"session_id": self.session_id, "tickets": tickets}))
        answer = self._with_ids(invocation_id, text=self.last_text, error=error or self.last_error)
        out.append(("answer", answer))
        self.last_text, self.last_error = "", None
        return out

    def error(self, status: int, detail: str) -> SseMessage:
        return ("error", {"session_id": self.session_id, "status": status, "detail": detail})

    def _with_ids(self, invocation_id: str, **data: Any) -> dict[str, Any]:
        return {"session_id": self.session_id, "invocation_id": invocation_id, **data}
