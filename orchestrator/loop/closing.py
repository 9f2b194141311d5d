"""Close an open turn that nobody will finish: every call without a response gets an
error response saying why, in one fenced write that also closes the calls and clears the
session's owed mark.

An agent tool's child session is finished by the worker running it. When that run ends
without finishing the turn (its time limit, a cancellation, a failure) the worker closes
the turn itself; when the worker is lost, the sweep does, once the child's lease lapses
(`SessionResumer`). Either way the child never keeps a call without a response, and a
redelivered run that finds the turn still open resumes it instead.
"""

from __future__ import annotations

import time

from google.genai import types

from toolfleet.orchestrator.contents import content, response_part
from toolfleet.orchestrator.models.protocol import function_calls
from toolfleet.orchestrator.sessions.events import CallRecord, Event
from toolfleet.orchestrator.sessions.fencing import Fence
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.messages import CallStatus, error_response

CLOSER = "orchestrator"  # the `worker` of the responses made here

# Error types the model sees in a closed turn's responses.
WORKER_LOST = "WorkerLost"  # the worker running the session's agent tool died
AGENT_TOOL_ENDED = "AgentToolEnded"  # its run ended (time limit, cancellation, failure)


def unanswered(session: Session) -> tuple[Event, list[types.FunctionCall]] | None:
    """The session's open turn and its calls without a response, or None if none is open."""
    turn = session.open_turn()
    if turn is None or turn.content is None:
        return None
    after = session.events[session.events.index(turn) + 1 :]
    answered = {
        part.function_response.id
        for event in after
        for part in (event.content.parts or () if event.content else ())
        if part.function_response
    }
    calls = [c for c in function_calls(turn.content) if c.id not in answered]
    return (turn, calls) if calls else None


def closing_event(turn: Event, calls: list[types.FunctionCall], error_type: str, why: str) -> Event:
    """One error response per call, in call order, for the turn's invocation."""
    now = time.time()
    responses = [
        response_part(c.id or "", c.name or "", error_response(error_type, why)) for c in calls
    ]
    records = [
        CallRecord(
            call_id=c.id or "",
            tool=c.name or "",
            status=CallStatus.ERROR,
            worker=CLOSER,
            finished_at=now,
        )
        for c in calls
    ]
    return Event(
        invocation_id=turn.invocation_id,
        author=turn.author,
        content=content("user", responses),
        calls=tuple(records),
    )


async def close_open_turn(
    store: SessionStore, session: Session, *, error_type: str, why: str, fence: Fence | None
) -> list[str]:
    """Answer the open turn's unanswered calls with `error_type`/`why`, close them (no
    worker starts them, a late result is dropped) and clear the owed mark, in one write
    under `fence`. The ids answered; none (and nothing written) if no turn is open."""
    found = unanswered(session)
    if found is None:
        return []
    turn, calls = found
    ids = [c.id or "" for c in calls]
    event = closing_event(turn, calls, error_type, why)
    await store.append(session, event, closed=ids, owes_turn=False, fence=fence)
    return ids
