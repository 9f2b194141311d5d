"""The function-calling loop of one invocation (DESIGN: "The loop").

Pure orchestration: it talks to a Model, a ToolRunner and a SessionStore only, so a
scripted model and an in-process runner can drive it in unit tests.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from google.genai import types

from orchestrator.agent import Agent
from orchestrator.fleet import PlannedCall, ToolRunner, failed
from orchestrator.model import CLIENT_CALL_ID_PREFIX, Model, ModelRequest, function_calls
from orchestrator.sessions import CallRecord, Event, Session, SessionStore, merge_deltas
from shared.config import Settings
from shared.context import TEMP_PREFIX
from shared.keys import Keys
from shared.messages import CallStatus, PendingCall, ToolActions, ToolCall, ToolResult


@dataclass(frozen=True)
class CallsDispatched:
    """Progress: the calls of a turn left for the fleet."""

    invocation_id: str
    calls: Sequence[ToolCall]


@dataclass(frozen=True)
class CallFinished:
    """Progress: one call's result arrived (in arrival order, not call order)."""

    invocation_id: str
    result: ToolResult


Update = Event | CallsDispatched | CallFinished


@dataclass
class Invocation:
    agent: Agent
    model: Model
    session: Session
    store: SessionStore
    runner: ToolRunner
    settings: Settings
    keys: Keys
    id: str = ""

    def __post_init__(self) -> None:
        self.id = self.id or f"inv-{uuid.uuid4().hex}"


async def run_invocation(inv: Invocation, message: types.Content | None) -> AsyncIterator[Update]:
    """Run the loop for one message; yield events and progress as they happen.

    `message=None` continues a session whose last event is already the model's input
    (a long-running call's final result, applied by the completions listener).
    """
    try:
        if message is not None:
            user_event = Event(invocation_id=inv.id, author="user", content=message)
            await inv.store.append(inv.session, user_event)
            yield user_event
        for _ in range(inv.settings.max_steps):
            request = ModelRequest(
                agent_name=inv.agent.name,
                instruction=inv.agent.instruction,
                contents=inv.session.contents(),
                tools=list(inv.agent.function_tools.values()),
            )
            content = with_call_ids(await inv.model.generate(request))
            model_event = Event(invocation_id=inv.id, author=inv.agent.name, content=content)
            await inv.store.append(inv.session, model_event)
            yield model_event
            calls = function_calls(content)
            if not calls:
                return
            results: dict[str, ToolResult] = {}
            async for update in _run_calls(inv, calls, results):
                yield update
            ordered = [results[c.id or ""] for c in calls]
            response_event = _responses_event(inv, ordered)
            pending = _pending_calls(inv, calls, ordered)
            await inv.store.append(inv.session, response_event, pending=pending)
            await inv.runner.settle(inv.session.id)
            yield response_event
            if response_event.actions.skip_summarization:
                return
        error = (
            f"stopped after max_steps={inv.settings.max_steps} model calls (TOOLFLEET_MAX_STEPS)"
        )
        limit_event = Event(invocation_id=inv.id, author=inv.agent.name, error=error)
        await inv.store.append(inv.session, limit_event)
        yield limit_event
    finally:
        # temp: state lives for one invocation only.
        for key in [k for k in inv.session.state if k.startswith(TEMP_PREFIX)]:
            del inv.session.state[key]


def with_call_ids(content: types.Content) -> types.Content:
    """Give every function call an id, keeping everything else exactly as returned."""
    seen: set[str] = set()
    for part in content.parts or ():
        call = part.function_call
        if call is None:
            continue
        if not call.id or call.id in seen:
            call.id = f"{CLIENT_CALL_ID_PREFIX}{uuid.uuid4().hex[:16]}"
        seen.add(call.id)
    return content


async def _run_calls(
    inv: Invocation, calls: list[types.FunctionCall], results: dict[str, ToolResult]
) -> AsyncIterator[Update]:
    """Validate all calls, dispatch the valid ones at once, collect every result."""
    planned: list[PlannedCall] = []
    for fc in calls:
        envelope = ToolCall(
            call_id=fc.id or "",
            tool=fc.name or "",
            args=dict(fc.args or {}),
            session_id=inv.session.id,
            app_name=inv.session.app_name,
            user_id=inv.session.user_id,
            invocation_id=inv.id,
            agent=inv.agent.name,
            state=dict(inv.session.state),
            reply_to=inv.keys.results(inv.session.id),
            dispatched_at=time.time(),
        )
        tool = inv.agent.function_tools.get(envelope.tool)
        if tool is None:
            available = ", ".join(sorted(inv.agent.function_tools)) or "none"
            results[envelope.call_id] = failed(
                envelope,
                "UnknownTool",
                f"there is no tool named {envelope.tool!r}; available tools: {available}",
            )
            continue
        size = len(json.dumps(envelope.args, default=str).encode())
        if size > inv.settings.max_payload_bytes:
            results[envelope.call_id] = failed(
                envelope,
                "InvalidArguments",
                f"the arguments are {size} bytes, over the {inv.settings.max_payload_bytes}-byte "
                "limit; pass less data (or a reference to it)",
            )
            continue
        _, problems = tool.validate(envelope.args)
        if problems:
            detail = "; ".join(str(p) for p in problems)
            results[envelope.call_id] = failed(
                envelope, "InvalidArguments", f"invalid arguments for {tool.name}: {detail}"
            )
            continue
        planned.append(PlannedCall(envelope, tool))
    for result in results.values():
        yield CallFinished(inv.id, result)
    if planned:
        yield CallsDispatched(inv.id, [p.call for p in planned])
        async for result in inv.runner.run(planned):
            results[result.call_id] = result
            yield CallFinished(inv.id, result)


def _pending_calls(
    inv: Invocation, calls: list[types.FunctionCall], ordered: list[ToolResult]
) -> list[PendingCall]:
    """Long-running calls that answered 'pending': their final result comes later."""
    return [
        PendingCall(
            call_id=result.call_id,
            tool=result.tool,
            session_id=inv.session.id,
            app_name=inv.session.app_name,
            user_id=inv.session.user_id,
            agent=inv.agent.name,
            invocation_id=inv.id,
            args=dict(call.args or {}),
            ticket=result.response,
            created_at=result.finished_at or time.time(),
        )
        for call, result in zip(calls, ordered, strict=True)
        if result.status is CallStatus.PENDING
    ]


def _responses_event(inv: Invocation, ordered: list[ToolResult]) -> Event:
    """One Content with every function response, in call order."""
    parts = [
        types.Part(
            function_response=types.FunctionResponse(id=r.call_id, name=r.tool, response=r.response)
        )
        for r in ordered
    ]
    actions = ToolActions(
        skip_summarization=bool(ordered) and all(r.actions.skip_summarization for r in ordered),
        transfer_to_agent=next(
            (r.actions.transfer_to_agent for r in ordered if r.actions.transfer_to_agent), None
        ),
        escalate=any(r.actions.escalate for r in ordered),
    )
    return Event(
        invocation_id=inv.id,
        author=inv.agent.name,
        content=types.Content(role="user", parts=parts),
        state_delta=merge_deltas([r.state_delta for r in ordered]),
        actions=actions,
        calls=[
            CallRecord(
                call_id=r.call_id,
                tool=r.tool,
                status=r.status,
                worker=r.worker,
                pid=r.pid,
                started_at=r.started_at,
                finished_at=r.finished_at,
                attempt=r.attempt,
            )
            for r in ordered
        ],
    )
