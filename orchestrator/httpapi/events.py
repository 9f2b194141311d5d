"""An invocation's updates as Server-Sent Events.

Event names and their data (JSON, each with `session_id`):
- `event`: a session event as stored, with `kind` (user, model, responses, completion,
  progress, credential, confirmation, error), `author`, `text` and the whole `event` (secret
  arguments masked);
- `calls`: the calls of a turn left for the fleet, each with its `pool` and arguments;
- `result`: one call's result: `status`, `worker`, `pid`, `duration_s`, `response`;
- `pending`: the invocation ended with these tickets open;
- `answer`: the invocation ended; `text` is the agent's last answer (its text, or
  the tools' responses when they skip summarization);
- `error`: the invocation failed, or the stream is closed by the server.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolfleet.orchestrator.httpapi.wire import Ticket, json_text
from toolfleet.orchestrator.loop.invocation import (
    CallFinished,
    CallsDispatched,
    InvocationEnded,
    Update,
)
from toolfleet.orchestrator.models.protocol import text_of
from toolfleet.orchestrator.sessions.events import Event, answer_of
from toolfleet.shared.config import Settings
from toolfleet.shared.messages import PendingCall
from toolfleet.shared.redaction import redact_deep

SseMessage = tuple[str, dict[str, Any]]
EVENT_NAMES = ("event", "calls", "result", "pending", "answer", "error")


def encode(name: str, data: dict[str, Any], event_id: int) -> bytes:
    """One Server-Sent Event: `event:` name, `id:` and `data:` as compact JSON on one line,
    then the blank line that ends it."""
    payload = json_text(data, separators=(",", ":"), default=str)
    return f"event: {name}\nid: {event_id}\ndata: {payload}\n\n".encode()


PING = b": ping\n\n"


def event_json(event: Event, secret_names: Sequence[str]) -> dict[str, Any]:
    """An Event as JSON with every secret-named value masked (call arguments, function
    responses, progress, at any depth)."""
    data: dict[str, Any] = redact_deep(
        event.model_dump(mode="json", exclude_none=True), secret_names
    )
    return data


def event_kind(event: Event) -> str:
    """The `kind` of an `event` message: error, credential, confirmation, user, progress,
    completion, model, or responses (a turn's function responses)."""
    if event.error:
        return "error"
    if event.credential_requests:
        return "credential"
    if event.confirmation_requests:
        return "confirmation"
    if event.author == "user":
        return "user"
    if event.author == "completion":
        return "progress" if event.progress is not None else "completion"
    if event.content is not None and event.content.role == "model":
        return "model"
    return "responses"


@dataclass
class UpdateWriter:
    """Turns one session's updates into SSE messages."""

    session_id: str
    pools: Mapping[str, str]  # the pool of each of the agent's tools, by name
    settings: Settings
    last_text: str = ""
    last_error: str | None = None

    def messages(self, update: Update) -> list[SseMessage]:
        """The SSE messages of one update: `calls` for a dispatch, `result` for a finished call,
        `event` for a session event (its answer or error kept for `ending`).

        No messages for InvocationEnded: the route answers that with `ending`."""
        if isinstance(update, CallsDispatched):
            calls = [
                {
                    "call_id": c.call_id,
                    "tool": c.tool,
                    "pool": self.pools.get(c.tool, self.settings.default_pool),
                    "args": redact_deep(c.args, self.settings.secret_arg_names),
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
                        response=redact_deep(r.response, self.settings.secret_arg_names),
                    ),
                )
            ]
        if isinstance(update, InvocationEnded):
            return []  # the route answers it with `pending` and `answer` (ending)
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
        """An `error` message: the invocation failed with `status`, or the server closed the
        stream (503)."""
        return ("error", {"session_id": self.session_id, "status": status, "detail": detail})

    def _with_ids(self, invocation_id: str, **data: Any) -> dict[str, Any]:
        return {"session_id": self.session_id, "invocation_id": invocation_id, **data}
