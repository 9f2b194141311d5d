"""ADK api_server's `/run` and `/run_sse` at ADK_PREFIX: one message to a session's agent,
answered with the invocation's events as ADK's Events (a JSON list, or `data:` frames).

A message's FunctionResponse parts complete the session's pending calls (a long-running
tool's final result, or a person's answer to `adk_request_confirmation`); its events are
the resumed agent's. Its other parts are the user's message, run as any other."""

# No `from __future__ import annotations`: FastAPI reads the route signatures.

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi import APIRouter
from fastapi.responses import StreamingResponse
from google.genai import types

from toolfleet.orchestrator.adkwire.confirming import held_back_responses, shows_adk_client
from toolfleet.orchestrator.adkwire.posting import Answer, Authorize, is_final, post_responses
from toolfleet.orchestrator.adkwire.session_ops import append_under_lease
from toolfleet.orchestrator.httpapi.adk_wire import RunAgentRequest, adk_event
from toolfleet.orchestrator.httpapi.api import HttpApi, RunItem
from toolfleet.orchestrator.httpapi.callers import Caller
from toolfleet.orchestrator.httpapi.errors import (
    COMMON_ERRORS,
    ApiError,
    detail_of,
    documented,
    status_of,
)
from toolfleet.orchestrator.httpapi.guards import Who
from toolfleet.orchestrator.httpapi.hub import HubItem, InvocationFailed, StreamClosed
from toolfleet.orchestrator.httpapi.routes_adk import ADK_PREFIX, refuse_state_write
from toolfleet.orchestrator.httpapi.routes_streams import HeldStream
from toolfleet.orchestrator.httpapi.wire import FiniteJSONResponse, json_text
from toolfleet.orchestrator.loop.invocation import InvocationEnded
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.shared.errors import SessionNotFoundError, ToolfleetError
from toolfleet.shared.messages import PendingCall


def adk_run_router(api: HttpApi) -> APIRouter:
    """`/run` and `/run_sse`: a message to the agent of one of the caller's sessions."""
    # Not in toolfleet's OpenAPI document: the body is google-genai's Content, whose own
    # schema allows more than the models accept (unknown fields refused, empty parts).
    router = APIRouter(
        prefix=ADK_PREFIX,
        tags=["adk"],
        responses=documented(*COMMON_ERRORS, 404, 409, 502),
        include_in_schema=False,
    )
    names = api.settings.secret_arg_names

    async def session_of(req: RunAgentRequest, caller: Who) -> Session:
        """The caller's session the message is for (404 for another's); 403 or 422
        before anything runs when it writes state the caller may not (`refuse_state_write`)."""
        api.runner(req.app_name)
        try:
            session = await api.session(caller, req.app_name, req.user_id, req.session_id)
        except ApiError:
            raise ApiError(404, f"Session not found: {req.session_id}") from None
        refuse_state_write(caller, req.state_delta)
        return session

    def shown(event: Event) -> bool:
        """ADK's Runner's events: the agents' (not the user's message, nor a completion
        the client sent), each with content, state writes, an escalation or a request
        for the user."""
        return event.author not in ("user", "completion") and shows_adk_client(event)

    async def events_of(
        req: RunAgentRequest, session: Session, caller: Caller
    ) -> AsyncIterator[Event]:
        """The events the message makes, as they are stored; ApiError for a failure."""
        runner = api.runner(req.app_name)
        message = req.new_message or types.Content(role="user", parts=[])
        parts = message.parts or []
        responses = [p.function_response for p in parts if p.function_response]
        rest = [p for p in parts if not p.function_response]
        if responses:
            written = req.state_delta if not rest else None  # else with the message's text

            async def write_state() -> None:  # once every response passed its checks
                if written:
                    delta = Event(invocation_id="", author="user", state_delta=written)
                    await append_under_lease(api.orch.replica, session.key, delta)

            async for event in completed(session, responses, caller, write_state):
                yield event
        if rest or not responses:
            content = message.model_copy(update={"parts": rest, "role": "user"})
            queue = api.start_invocation(
                runner, req.user_id, req.session_id, content, req.state_delta
            )
            async for event in until_ended(queue):
                yield event

    async def completed(
        session: Session,
        responses: list[types.FunctionResponse],
        caller: Caller,
        before_posting: Callable[[], Awaitable[None]],
    ) -> AsyncIterator[Event]:
        """Post the responses, then the events of applying them until their calls are
        answered, within the server's longest wait: as this replica applies them, then
        those the store has that were not seen."""
        known = {e.id for e in session.events}
        # The questions the calls ask as they are answered: one asked again once its
        # answer is applied ends the wait, its new question being the client's.
        asked = {
            c.call_id: c.asked_again
            for c in await api.orch.replica.store.pending_calls(session.key)
        }
        subscription = api.hub.subscribe(session.key)
        try:
            try:
                posted = await post_responses(
                    api.completions,
                    session.key,
                    responses,
                    api.credentials,
                    authorize=_authorizer(caller),
                    before_posting=before_posting,
                )
            except ToolfleetError as exc:
                raise ApiError(status_of(exc), detail_of(exc)) from exc
            except ValueError as exc:  # a response that names no request or no credential
                raise ApiError(422, str(exc)) from exc
            # An intermediate result leaves its call pending: waited for until applied.
            finals = [is_final(r) for r in responses]
            call_ids = [c for (c, _), final in zip(posted, finals, strict=True) if final]
            entries = [e for (_, e), final in zip(posted, finals, strict=True) if not final]
            waiting = asyncio.create_task(
                api.orch.wait_until_answered(
                    session.key, call_ids, api.http.max_wait_s, entries=entries, asked=asked
                )
            )
            try:
                async for item in _items_until(subscription.queue, waiting):
                    if isinstance(item, Event):
                        known.add(item.id)
                        yield item
            finally:
                waiting.cancel()
        finally:
            api.hub.unsubscribe(subscription)
        # Another replica's listener may have applied them (its hub saw the events), and
        # an invocation's last event is stored a moment before it is published.
        try:
            stored = await api.orch.replica.store.get(session.key)
        except SessionNotFoundError:
            return  # deleted meanwhile
        for event in stored.events:
            if event.id not in known:
                yield event

    async def until_ended(queue: "asyncio.Queue[RunItem]") -> AsyncIterator[Event]:
        api.track(queue)
        try:
            while True:
                item = await queue.get()
                if isinstance(item, InvocationFailed):
                    raise ApiError(item.status, item.detail)
                if isinstance(item, StreamClosed):
                    raise ApiError(503, item.reason)
                if isinstance(item, InvocationEnded):
                    return
                if isinstance(item, Event):
                    yield item
        finally:
            api.untrack(queue)

    @router.post("/run", summary="Run the agent on a message; its events as ADK's Events")
    async def run_agent(req: RunAgentRequest, caller: Who) -> FiniteJSONResponse:
        session = await session_of(req, caller)
        long_running = api.tools.long_running(req.app_name)
        events = [
            adk_event(each, long_running, names)
            async for e in events_of(req, session, caller)
            if shown(e)
            for each in _as_adk_shows(e)
        ]
        return FiniteJSONResponse(events)

    @router.post(
        "/run_sse",
        response_class=StreamingResponse,
        responses={200: {"description": "ADK's frames", "content": {"text/event-stream": {}}}},
        summary="Run the agent on a message; its events as `data:` frames",
    )
    async def run_agent_sse(req: RunAgentRequest, caller: Who) -> StreamingResponse:
        session = await session_of(req, caller)
        long_running = api.tools.long_running(req.app_name)
        # An event stream as toolfleet's own: within the caps on streams (429, 503),
        # taken before anything runs or is posted.
        release = api.hold_stream(caller)

        async def frames() -> AsyncIterator[bytes]:
            try:
                async for event in events_of(req, session, caller):
                    if not shown(event):
                        continue
                    for each in _as_adk_shows(event):
                        for data in _split_artifacts(adk_event(each, long_running, names)):
                            yield f"data: {json_text(data)}\n\n".encode()
            except ApiError as exc:  # the stream has started: said in a frame, as ADK does
                yield f"data: {json.dumps({'error': exc.detail})}\n\n".encode()

        return HeldStream(frames(), release)

    return router


def _authorizer(caller: Caller) -> Authorize:
    """403 for a response `caller` may not give, as the ticket routes decide: a result
    only from a service of the app or an admin (or its user, for a tool answered by its
    user), a confirmation from its user or an approver, a credential from its user."""
    rules = {
        "result": (caller.may_post_result, "post its result: that needs service:<app>"),
        "confirmation": (caller.may_confirm, "answer it: that needs its user or approver:<app>"),
        "credential": (caller.may_supply_credential, "supply its credential: only its user may"),
    }

    def authorize(call: PendingCall, answer: Answer) -> None:
        allowed, need = rules[answer]
        if not allowed(call):
            raise ApiError(403, f"{caller.subject!r} may not {need} (call {call.call_id!r})")

    return authorize


def _as_adk_shows(event: Event) -> list[Event]:
    """The event, then ADK's error responses for the calls it holds back for a
    confirmation (ADK shows them; the model gets the calls' responses once they run)."""
    held_back = held_back_responses(event)
    return [event] if held_back is None else [event, held_back]


def _split_artifacts(event: dict[str, Any]) -> list[dict[str, Any]]:
    """An event with content and saved artifacts streamed as ADK's dev UI reads it: the
    content with `artifactDelta` cleared, then the same event with only its actions."""
    actions = event["actions"]
    assert isinstance(actions, dict)
    if not actions.get("artifactDelta") or "content" not in event:
        return [event]
    content_only = {**event, "actions": {**actions, "artifactDelta": {}}}
    actions_only = {k: v for k, v in event.items() if k != "content"}
    return [content_only, actions_only]


async def _items_until(
    queue: "asyncio.Queue[HubItem]", done: "asyncio.Task[bool]"
) -> AsyncIterator[HubItem]:
    """The queue's items as they come until `done` finishes, then those already queued."""
    while not done.done():
        getter = asyncio.ensure_future(queue.get())
        finished, _ = await asyncio.wait({getter, done}, return_when=asyncio.FIRST_COMPLETED)
        if getter in finished:
            yield getter.result()
        else:
            getter.cancel()
    while not queue.empty():
        yield queue.get_nowait()
