"""A session's turns as timelines: each call where and when it ran (the workers' clocks),
and the tickets its long-running calls opened, with their completions.

Read from the stored events only: tool names, statuses, workers and times, never a
call's arguments or results, so nothing secret can be shown.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from toolfleet.orchestrator.sessions.events import CallRecord, Event
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.shared.messages import CallStatus, PendingCall


class TimelineCall(BaseModel):
    """One call's run: its lane is the worker process that ran it."""

    call_id: str
    tool: str
    status: CallStatus
    lane: str = Field(description="`worker · pid` of the process that ran it, or `orchestrator`.")
    started_at: float = Field(description="Epoch seconds, the worker's clock.")
    finished_at: float
    attempt: int


class TimelineTicket(BaseModel):
    """A long-running call's ticket: opened when its call answered `pending`."""

    call_id: str
    tool: str
    opened_at: float
    completed_at: float | None = Field(description="When the final result was posted; None: open.")
    completed_by: str | None = Field(description="Who posted it: http, cli, job, api.")
    progress: int = Field(default=0, description="Intermediate results applied.")


class TimelineTurn(BaseModel):
    """One model turn's calls, from the model's answer to the last result."""

    invocation_id: str
    asked_at: float = Field(description="When the model's turn with the calls was stored.")
    answered_at: float = Field(description="When the calls' responses were stored.")
    calls: list[TimelineCall]
    tickets: list[TimelineTicket]


class Timeline(BaseModel):
    """Every turn with calls of a session, oldest first."""

    session_id: str
    app_name: str
    user_id: str
    turns: list[TimelineTurn]


def lane_of(record: CallRecord) -> str:
    """The worker process a call ran in, as one label."""
    if not record.pid:
        return record.worker or "orchestrator"
    return f"{record.worker} · {record.pid}"


def timeline_of(session: Session, pending: Sequence[PendingCall]) -> Timeline:
    """The session's turns: each event holding a turn's responses (not a completion's),
    with the model turn before it and the completions after it."""
    turns: list[TimelineTurn] = []
    tickets: dict[str, TimelineTicket] = {}
    asked_at = 0.0
    for event in session.events:
        if event.author == "completion":
            _complete(tickets, event)
        elif event.calls:
            turn = _turn(event, asked_at or event.timestamp)
            tickets.update((t.call_id, t) for t in turn.tickets)
            turns.append(turn)
        elif event.get_function_calls():
            asked_at = event.timestamp
    still_open = {p.call_id for p in pending}
    for ticket in tickets.values():
        if ticket.call_id in still_open:
            ticket.completed_at, ticket.completed_by = None, None
    return Timeline(
        session_id=session.id, app_name=session.app_name, user_id=session.user_id, turns=turns
    )


def _turn(event: Event, asked_at: float) -> TimelineTurn:
    calls = [
        TimelineCall(
            call_id=r.call_id,
            tool=r.tool,
            status=r.status,
            lane=lane_of(r),
            started_at=r.started_at or asked_at,
            finished_at=r.finished_at or r.started_at or asked_at,
            attempt=r.attempt,
        )
        for r in event.calls
    ]
    tickets = [
        TimelineTicket(
            call_id=c.call_id,
            tool=c.tool,
            opened_at=c.finished_at,
            completed_at=None,
            completed_by=None,
        )
        for c in calls
        if c.status is CallStatus.PENDING
    ]
    return TimelineTurn(
        invocation_id=event.invocation_id,
        asked_at=asked_at,
        answered_at=event.timestamp,
        calls=calls,
        tickets=tickets,
    )


def _complete(tickets: dict[str, TimelineTicket], event: Event) -> None:
    for record in event.calls:
        ticket = tickets.get(record.call_id)
        if ticket is None:
            continue
        if record.status is CallStatus.PENDING:  # an intermediate result
            ticket.progress += 1
        else:
            ticket.completed_at, ticket.completed_by = record.finished_at, record.worker
