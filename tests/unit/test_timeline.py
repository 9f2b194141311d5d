"""A session's timeline from its events: calls in lanes by worker process, tickets with
their progress and completion, nothing of the arguments or results."""

from __future__ import annotations

from google.genai import types

from toolfleet.orchestrator.httpapi.timeline import timeline_of
from toolfleet.orchestrator.sessions.events import CallRecord, Event
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.shared.messages import CallStatus, PendingCall


def record(call_id: str, status: CallStatus, worker: str, pid: int, start: float) -> CallRecord:
    return CallRecord(
        call_id=call_id, tool="t_" + call_id, status=status, worker=worker, pid=pid,
        started_at=start, finished_at=start + 1.0,
    )  # fmt: skip


def model_turn(at: float) -> Event:
    call = types.FunctionCall(id="c1", name="t_c1", args={"api_key": "sk-secret"})
    content = types.Content(role="model", parts=[types.Part(function_call=call)])
    return Event(invocation_id="inv", author="agent", content=content, timestamp=at)


def session_of(events: list[Event]) -> Session:
    session = Session(id="s1", app_name="app", user_id="u1")
    session.events.extend(events)
    return session


def pending(call_id: str) -> PendingCall:
    return PendingCall(
        call_id=call_id, tool="t_" + call_id, session_id="s1", app_name="app", user_id="u1",
        agent="agent", invocation_id="inv", ticket={}, created_at=0.0,
    )  # fmt: skip


def test_calls_land_in_their_process_lanes_and_tickets_follow_their_completions() -> None:
    responses = Event(
        invocation_id="inv", author="agent", timestamp=105.0,
        calls=[
            record("c1", CallStatus.SUCCESS, "w1@h", 11, 100.5),
            record("c2", CallStatus.ERROR, "w1@h", 12, 100.6),
            record("c3", CallStatus.PENDING, "w2@h", 21, 100.7),
            record("c4", CallStatus.PENDING, "w2@h", 21, 100.8),
        ],
    )  # fmt: skip
    progress = Event(
        invocation_id="inv", author="completion",
        calls=[record("c3", CallStatus.PENDING, "job", 0, 200.0)],
    )  # fmt: skip
    final = Event(
        invocation_id="inv", author="completion",
        calls=[record("c3", CallStatus.SUCCESS, "http", 0, 3600.0)],
    )  # fmt: skip
    timeline = timeline_of(
        session_of([model_turn(100.0), responses, progress, final]), [pending("c4")]
    )

    (turn,) = timeline.turns
    assert turn.asked_at == 100.0 and turn.answered_at == 105.0
    assert [c.lane for c in turn.calls] == ["w1@h · 11", "w1@h · 12", "w2@h · 21", "w2@h · 21"]
    assert [c.status for c in turn.calls][:2] == [CallStatus.SUCCESS, CallStatus.ERROR]
    c3, c4 = turn.tickets
    assert (c3.opened_at, c3.completed_at, c3.completed_by, c3.progress) == (
        101.7,
        3601.0,
        "http",
        1,
    )
    assert (c4.completed_at, c4.completed_by) == (None, None)  # still pending
    assert "sk-secret" not in timeline.model_dump_json()
