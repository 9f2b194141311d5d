"""Parking a turn whose tools wait for a credential (ADK's request_credential) or a
person's confirmation (require_confirmation, request_confirmation).

A tool that lacks a credential calls `tool_context.request_credential(auth_config)`.
The turn is parked: its other results wait in Redis (ParkedTurns), each such call is
recorded as a pending credential request, and the model sees nothing yet. When the
user supplies the credential, the completions listener runs the call again
(completions.credentials) and, once every call of the turn has its result, the model
gets all responses in call order. A confirmation works alike: confirmed, the call is
sent (again) with the person's answer; rejected, it gets an error response.
"""

from __future__ import annotations

import functools
import time
from typing import Any

from google.genai import types

from toolfleet.orchestrator.loop import held
from toolfleet.orchestrator.loop.confirmation import GATE
from toolfleet.orchestrator.loop.invocation import Invocation
from toolfleet.orchestrator.loop.turn import pending_call
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.shared.messages import ToolResult
from toolfleet.shared.sealing import Sealer


async def park_turn(
    inv: Invocation, turn_id: str, calls: list[types.FunctionCall], ordered: list[ToolResult]
) -> Event:
    """Keep the turn's results, record its credential and confirmation requests, tell
    the client.

    A request's call is sent again from its record: its secret arguments are stored
    sealed (masked without a fleet key: then that call cannot be sent again)."""
    sealer = Sealer.of(inv.settings)
    args = {c.id: _sealed(dict(c.args or {}), sealer) for c in calls}
    requests = [
        pending_call(
            inv,
            r,
            args[r.call_id],
            ticket=r.actions.requested_auth or r.actions.requested_confirmation or {},
            created_at=time.time(),
            kind="credential" if r.actions.requested_auth else "confirmation",
            turn_id=turn_id,
        )
        for r in ordered
        if r.actions.waits()
    ]
    await inv.store.parked.park(turn_id, ordered, inv.fence)
    shown = {c.id: dict(c.args or {}) for c in calls}
    held_back = {
        r.call_id for r in ordered if r.actions.requested_confirmation and r.worker == GATE
    }
    event = Event(
        invocation_id=inv.id,
        author=inv.agent.name,
        credential_requests=[
            credential_request(p.call_id, p.tool, p.ticket, p.asked_again)
            for p in requests
            if p.kind == "credential"
        ],
        confirmation_requests=[
            confirmation_request(
                p.call_id,
                p.tool,
                shown[p.call_id],
                p.ticket,
                p.asked_again,
                held_back=p.call_id in held_back,
            )
            for p in requests
            if p.kind == "confirmation"
        ],
    )
    # The results stream forgets the turn's results in the step that parks them (kept
    # in ParkedTurns), as it does when it stores responses: a call sent again once
    # confirmed must not be answered by its first run's result, still on the stream,
    # when a new reader (another Runner, after a restart) reads it from the start. A
    # ParallelAgent's branch leaves that to the workflow (loop/workflow.py).
    settle = None if inv.branch else functools.partial(inv.runner.stage_settle, inv.session.key)
    await held.append(inv, event, pending=requests, also=settle)
    return event


async def ask_after_run(
    inv: Invocation, calls: list[types.FunctionCall], asking: list[ToolResult]
) -> Event:
    """Record the confirmations that calls which ran asked for, and tell the client; the
    turn is not parked (its responses, these calls' interim ones among them, go to the
    model now, as ADK sends them). Confirmed, such a call runs again and its final
    response is applied as a long-running call's is."""
    sealer = Sealer.of(inv.settings)
    args = {c.id: dict(c.args or {}) for c in calls}
    requests = [
        pending_call(
            inv,
            r,
            _sealed(args[r.call_id], sealer),
            ticket=r.actions.requested_confirmation or {},
            created_at=time.time(),
            kind="confirmation",
        )
        for r in asking
    ]
    event = Event(
        invocation_id=inv.id,
        author=inv.agent.name,
        confirmation_requests=[
            confirmation_request(p.call_id, p.tool, args[p.call_id], p.ticket, p.asked_again)
            for p in requests
        ],
    )
    await held.append(inv, event, pending=requests)
    return event


def asks_after_run(result: ToolResult) -> bool:
    """Whether `result` is a tool's own request for a confirmation, made while it ran
    (`tool_context.request_confirmation`), as opposed to a credential request or a call
    held back before it was sent (require_confirmation): those park the turn."""
    return result.actions.requested_confirmation is not None and result.worker != GATE


def confirmation_request(
    call_id: str,
    tool: str,
    args: dict[str, Any],
    asked: dict[str, Any],
    asked_again: int,
    *,
    held_back: bool = False,
) -> dict[str, Any]:
    """How a confirmation request is shown: the call, the hint and payload asked and
    which of the call's questions it is (its `asked_again`), which an answer names;
    `held_back` when the call was not sent (require_confirmation), not asked as it ran."""
    request = {
        "call_id": call_id,
        "tool": tool,
        "args": args,
        "hint": asked.get("hint", ""),
        "payload": asked.get("payload"),
        "asked_again": asked_again,
    }
    return {**request, "held_back": True} if held_back else request


def credential_request(
    call_id: str, tool: str, auth_config: dict[str, Any], asked_again: int
) -> dict[str, Any]:
    """How a credential request is shown: the call, the AuthConfig asked and which of
    the call's requests it is (its `asked_again`), which an answer names."""
    return {
        "call_id": call_id,
        "tool": tool,
        "auth_config": auth_config,
        "asked_again": asked_again,
    }


def _sealed(args: dict[str, Any], sealer: Sealer | None) -> dict[str, Any]:
    return args if sealer is None else sealer.seal(args)
