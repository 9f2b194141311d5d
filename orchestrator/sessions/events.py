"""Session events: what happened in a session, as stored and shown (google-genai Contents
plus metadata), and how the user-facing text is read from them."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from google.genai import types
from pydantic import BaseModel, Field

from toolfleet.orchestrator.contents import unvalidated
from toolfleet.shared.ids import unique_hex
from toolfleet.shared.messages import CallStatus, ToolActions, ToolResult


class CallRecord(BaseModel):
    """Where and how one call ran; kept beside its function response."""

    call_id: str
    tool: str
    status: CallStatus
    worker: str = ""
    pid: int = 0
    started_at: float = 0.0
    finished_at: float = 0.0
    attempt: int = 1

    @classmethod
    def of(cls, result: ToolResult) -> CallRecord:
        """The record of where and how the call of `result` ran."""
        # Every field from a validated ToolResult's: one record per call, and validating
        # each again cost a third of making its part.
        values = {
            "call_id": result.call_id,
            "tool": result.tool,
            "status": result.status,
            "worker": result.worker,
            "pid": result.pid,
            "started_at": result.started_at,
            "finished_at": result.finished_at,
            "attempt": result.attempt,
        }
        return unvalidated(cls, values, set(values))


class Event(BaseModel):
    """One entry of a session's history: an optional Content and its metadata.

    `author` is "user", an agent's name, or "completion" (a long-running call's final
    result). Stored as JSON without temp: deltas, with secret-named values masked.

    Attributes:
        id: The event's id, 32 hex digits; new by default.
        invocation_id: The invocation that made it.
        author: "user", an agent's name, or "completion".
        branch: Set on the events of a ParallelAgent's sub-agent; that branch's model sees
            only the events of its branch and above. None: no branch.
        timestamp: Epoch seconds when it was made.
        content: The message (text, function calls, function responses); None: none.
        state_delta: The state writes it carries.
        actions: The effects its tools asked of the loop.
        calls: Where and how each call whose response it carries ran.
        error: A failure to show the user; None: none.
        progress: An intermediate result of a long-running call: shown, not sent to the
            model.
        credential_requests: Tools waiting for a user's credential: shown, not sent.
        confirmation_requests: Calls waiting for a person's confirmation: shown, not sent.
        long_running_tool_ids: The ids of its calls of long-running tools, filled in by
            the ADK Runner; not stored.
        partial: None, as on ADK's events of a run that does not stream; not stored.
        turn_complete: None, as `partial`; not stored.
    """

    id: str = Field(default_factory=unique_hex)  # 32 hex digits, as uuid4().hex
    invocation_id: str
    author: str
    # ADK's: set on the events of a ParallelAgent's sub-agent ("parallel.sub", nested
    # ones appended); a branch's model sees only the events of its branch and above.
    branch: str | None = None
    timestamp: float = Field(default_factory=time.time)
    content: types.Content | None = None
    state_delta: dict[str, Any] = Field(default_factory=dict)
    actions: ToolActions = Field(default_factory=ToolActions)
    # The sequences below default to one shared empty tuple, not a new list per event:
    # most events have none, and a session's events stay in memory (its cache), where
    # each tracked container is work for every garbage collection. `calls` is a tuple:
    # pydantic serializes a Sequence field item by item in Python, at twice the cost (a
    # wide turn's responses event carries thousands of records).
    calls: tuple[CallRecord, ...] = ()
    error: str | None = None
    # An intermediate result of a long-running call: shown, not sent to the model.
    progress: dict[str, Any] | None = None
    # Tools waiting for a credential (call id, tool, auth config): shown, not sent.
    credential_requests: Sequence[dict[str, Any]] = ()
    # Calls waiting for a person's confirmation (call id, tool, args, hint, payload):
    # shown (ADK's client sees `adk_request_confirmation` calls), not sent to the model.
    confirmation_requests: Sequence[dict[str, Any]] = ()
    # ADK's (None there too): the ids of this event's calls of long-running tools. Not
    # stored: the ADK Runner fills it in from the agent's tools when it yields the event.
    long_running_tool_ids: set[str] | None = Field(default=None, exclude=True)
    # ADK's, None as on ADK's events of a run that does not stream (toolfleet's runs
    # yield whole events): `if event.partial:` skips nothing. Not stored.
    partial: bool | None = Field(default=None, exclude=True)
    turn_complete: bool | None = Field(default=None, exclude=True)

    def get_function_calls(self) -> list[types.FunctionCall]:
        """The function calls in the event's content (ADK's Event has the same)."""
        parts = self.content.parts or () if self.content else ()
        return [p.function_call for p in parts if p.function_call]

    def get_function_responses(self) -> list[types.FunctionResponse]:
        """The function responses in the event's content (ADK's Event has the same)."""
        parts = self.content.parts or () if self.content else ()
        return [p.function_response for p in parts if p.function_response]

    def is_final_response(self) -> bool:
        """ADK's rule: the tools' responses are the answer (skip_summarization), or the
        run pauses on a long-running call, or the event has neither calls nor responses."""
        if self.actions.skip_summarization or self.long_running_tool_ids:
            return True
        return not self.get_function_calls() and not self.get_function_responses()


def answer_of(event: Event) -> str:
    """The user-facing text of an event: the model's text, or - when the model is not
    asked to summarize (skip_summarization) - the tools' responses themselves."""
    if event.content is None:
        return ""
    if event.actions.skip_summarization:
        responses = [
            p.function_response.response or {}
            for p in event.content.parts or ()
            if p.function_response
        ]
        return "\n".join(
            str(r["result"]) if set(r) == {"result"} else json.dumps(r) for r in responses
        )
    if event.content.role != "model":
        return ""
    return "".join(p.text for p in event.content.parts or () if p.text and not p.thought)


def merge_deltas(
    deltas: list[dict[str, Any]], base: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The state writes of one turn's calls, in call order (never arrival order), as if the
    calls had run one after another on one state, as ADK's calls of a turn share one.

    Each call wrote from `base`, the state they all saw: a list it extended keeps the
    earlier calls' items and adds its own, a dict it changed keeps the earlier calls'
    keys and takes its own changes, and any other write replaces the value (the later
    call's wins)."""
    seen = base or {}
    merged: dict[str, Any] = {}
    for delta in deltas:
        for key, value in delta.items():
            before = seen.get(key)
            merged[key] = _rebased(before, merged[key], value) if key in merged else value
    return merged


def _rebased(before: Any, earlier: Any, written: Any) -> Any:
    """What a call that turned `before` into `written` would have written after the earlier
    calls turned it into `earlier`."""
    if isinstance(written, list) and isinstance(earlier, list):
        items: list[Any] = before if isinstance(before, list) else []
        if written[: len(items)] == items:
            return [*earlier, *written[len(items) :]]
    if isinstance(written, dict) and isinstance(earlier, dict):
        fields: dict[str, Any] = before if isinstance(before, dict) else {}
        out = {k: v for k, v in earlier.items() if not (k in fields and k not in written)}
        for key, value in written.items():
            if key in fields and fields[key] == value:
                continue  # this call left the key as it found it
            out[key] = _rebased(fields.get(key), earlier[key], value) if key in earlier else value
        return out
    return written
