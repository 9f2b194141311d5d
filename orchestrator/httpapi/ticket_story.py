"""What a ticket's session says around it: the user's message that started the invocation
which opened it, and what the agent said when it made the long-running call.

Read from the session's stored events; texts only, never the calls' arguments or results.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from toolfleet.orchestrator.sessions.events import Event, answer_of
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.shared.messages import PendingCall

# A ticket listing is read every few seconds: long messages are cut to this many characters.
MAX_TEXT_CHARS = 2000


class TicketStory(BaseModel):
    """The words around a ticket, as its session stored them."""

    asked: str | None = Field(
        default=None,
        description="The user's message that started the invocation which opened the ticket.",
    )
    agent_said: str | None = Field(
        default=None,
        description="The model's text in the turn that made the call, else its last text "
        "before it in the invocation, else its first text after it (what it told the user "
        "while waiting).",
    )


def story_of(session: Session, call: PendingCall) -> TicketStory:
    """The user's message and the agent's words around `call` in `session`; None for what
    the session does not hold (compacted away, or never said)."""
    events = session.events
    at = _call_index(events, call)
    if at is None:
        return TicketStory()
    asked = next(
        (t for e in reversed(events[:at]) if e.author == "user" and (t := _user_text(e))), None
    )
    said = answer_of(events[at]) or None
    if said is None:
        said = next(
            (
                t
                for e in reversed(events[:at])
                if e.invocation_id == call.invocation_id and (t := answer_of(e))
            ),
            None,
        )
    if said is None:
        said = next(
            (
                t
                for e in events[at + 1 :]
                if e.invocation_id == call.invocation_id
                and e.author not in ("user", "completion")
                and (t := answer_of(e))
            ),
            None,
        )
    return TicketStory(asked=_cut(asked), agent_said=_cut(said))


def _call_index(events: Sequence[Event], call: PendingCall) -> int | None:
    """The index of the model event that made `call`."""
    for index in range(len(events) - 1, -1, -1):
        if any(fc.id == call.call_id for fc in events[index].get_function_calls()):
            return index
    return None


def _user_text(event: Event) -> str:
    if event.content is None:
        return ""
    parts = event.content.parts or ()
    return "".join(p.text for p in parts if p.text and not p.thought)


def _cut(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_TEXT_CHARS:
        return text
    return text[: MAX_TEXT_CHARS - 1] + "…"
