"""Pending tickets and their completion (the webhook), and health."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Any
from urllib.parse import urlencode

import redis
from fastapi import APIRouter, Path, Query
from fastapi.responses import JSONResponse

from toolfleet.orchestrator.fleet.pools import live_workers
from toolfleet.orchestrator.httpapi.api import HttpApi
from toolfleet.orchestrator.httpapi.callers import Caller
from toolfleet.orchestrator.httpapi.errors import COMMON_ERRORS, ApiError, documented
from toolfleet.orchestrator.httpapi.guards import Who
from toolfleet.orchestrator.httpapi.routes_confirmations import ticket_for_post
from toolfleet.orchestrator.httpapi.ticket_story import TicketStory, story_of
from toolfleet.orchestrator.httpapi.wire import (
    ID_PATTERN,
    Accepted,
    Decision,
    Health,
    PoolHealth,
    PostResult,
    SuppliedCredential,
    Ticket,
)
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.shared.errors import CompletionError, SessionNotFoundError
from toolfleet.shared.keys import SessionKey
from toolfleet.shared.messages import PendingCall

CallId = Annotated[str, Path(pattern=ID_PATTERN, description="The pending call's id.")]
HEALTH_TIMEOUT_S = 2.0


def tickets_router(api: HttpApi) -> APIRouter:
    """Routes under `/tickets`: list and read pending calls, post results (the webhook),
    supply credentials, approve and reject.

    Posts run the CLI's synchronous code path in a thread, so refused completions are
    dead-lettered the same way."""
    router = APIRouter(prefix="/tickets", tags=["tickets"], responses=documented(*COMMON_ERRORS))
    names = api.settings.secret_arg_names

    # A call's story is fixed once the agent has spoken around it: kept by call id (for
    # the calls still pending), so a page reading the list every few seconds does not
    # read every ticket's session every time. Only the listing keeps one: it forgets
    # those of the calls no longer pending, which reading one ticket cannot tell.
    stories = api.ticket_stories

    async def story(
        call: PendingCall, sessions: dict[SessionKey, Session | None], keep: bool
    ) -> TicketStory:
        known = stories.get(call.call_id)
        if known is not None:
            return known
        key = call.session_key
        if key not in sessions:
            try:
                sessions[key] = await api.store.get(key)
            except SessionNotFoundError:
                sessions[key] = None
        session = sessions[key]
        told = story_of(session, call) if session is not None else TicketStory()
        if keep and told.agent_said is not None:
            stories[call.call_id] = told
        return told

    async def ticket_out(
        call: PendingCall,
        caller: Caller,
        now: float | None = None,
        sessions: dict[SessionKey, Session | None] | None = None,
    ) -> Ticket:
        """The API view of `call` for `caller`: its actions, the words around it in its
        session, and its timeline's link when the caller may see the session.
        `sessions`: the sessions read already for this answer, given by the listing."""
        told = await story(call, {} if sessions is None else sessions, keep=sessions is not None)
        update: dict[str, Any] = {
            "actions": caller.actions(call),
            "asked": told.asked,
            "agent_said": told.agent_said,
            "timeline": timeline_link(call) if caller.owns_call(call) else None,
        }
        return Ticket.of(call, names, now).model_copy(update=update)

    @router.get("", response_model=list[Ticket], summary="Pending long-running calls, oldest first")
    async def list_tickets(
        caller: Who,
        app: Annotated[str | None, Query(description="Only this app's.")] = None,
        session_id: Annotated[str | None, Query(description="Only this session's.")] = None,
        tool: Annotated[str | None, Query(description="Only tools whose name contains it.")] = None,
    ) -> list[Ticket]:
        now = time.time()
        sessions: dict[SessionKey, Session | None] = {}
        pending = await api.store.pending_calls()
        for gone in stories.keys() - {c.call_id for c in pending}:
            del stories[gone]  # completed: its story is not asked for again
        return [
            await ticket_out(c, caller, now, sessions)
            for c in pending
            if caller.sees(c)
            and (app is None or c.app_name == app)
            and (session_id is None or c.session_id == session_id)
            and (tool is None or tool in c.tool)
        ]

    @router.get(
        "/{call_id}", response_model=Ticket, responses=documented(404), summary="One pending call"
    )
    async def get_ticket(call_id: CallId, caller: Who) -> Ticket:
        call = await api.ticket(caller, call_id)
        waiting = await asyncio.to_thread(api.completions.waiting, call)
        shown = await ticket_out(call, caller)
        return shown.model_copy(update={"waiting_completions": waiting})

    async def authorize(
        caller: Caller,
        call_id: str,
        allowed: Callable[[PendingCall], bool],
        need: str,
        response: dict[str, Any],
        final: bool = True,
    ) -> PendingCall | None:
        """404 unless `caller` may see the ticket, 403 unless `allowed` says they may act;
        the record read to decide it. A call not pending refuses the post of `response`,
        dead-lettered with why.

        An admin passes without the record (None): a call no longer pending gets the
        completion refused (404 or 409) and dead-lettered below, as the CLI does."""
        if caller.admin:
            return None
        call = await ticket_for_post(api, caller, call_id, response, final=final)
        if not allowed(call):
            raise ApiError(403, f"{caller.subject!r} may not {need} ticket {call_id!r}")
        return call

    async def post(
        call_id: str, response: dict[str, Any], final: bool, known: PendingCall | None
    ) -> Accepted:
        def post_sync() -> tuple[str, PendingCall | None]:
            call = known  # read already to authorize the caller, unless an admin
            if call is None:
                with contextlib.suppress(CompletionError):  # post_result refuses it below
                    call = api.completions.get(call_id)
            # The CLI's code path: a refused completion (over the size limit too) is
            # dead-lettered and raises.
            entry = api.completions.post_result(call_id, response, final=final, source="http")
            return entry, call

        entry_id, call = await asyncio.to_thread(post_sync)
        kind = "final result" if final else "progress"
        return Accepted(
            call_id=call_id,
            session_id=call.session_id if call else "",
            final=final,
            entry_id=entry_id,
            detail=f"{kind} queued; the orchestrator applies it once and resumes the agent",
        )

    completion_errors = documented(404, 409)

    @router.post(
        "/{call_id}/result",
        status_code=202,
        response_model=Accepted,
        responses=completion_errors,
        summary="Post a result for a pending call (intermediate or final)",
        description=(
            "The webhook an external ticket system calls. A final result is applied once: "
            "a call that already has its final result answers 409, an unknown call 404; "
            "both are kept in the dead-letter stream."
        ),
    )
    async def post_result(call_id: CallId, body: PostResult, caller: Who) -> Accepted:
        need = "post results for (it needs service:<app>)"
        known = await authorize(
            caller, call_id, caller.may_post_result, need, body.response, body.final
        )
        return await post(call_id, body.response, body.final, known)

    @router.post(
        "/{call_id}/credential",
        status_code=202,
        response_model=Accepted,
        responses=completion_errors,
        summary="Supply the credential a tool asked for (request_credential)",
        description=(
            "Stores the credential encrypted for the ticket's user and runs the call again; "
            "the credential never appears in sessions, task messages or the model's input. "
            "A call that waits for a result, not a credential, answers 409, and so does one "
            "that asks again since the request answered (`asked_again`) or for another "
            "credential (`credential_key`): nothing is stored."
        ),
    )
    async def supply_credential(call_id: CallId, body: SuppliedCredential, caller: Who) -> Accepted:
        def check(call: PendingCall) -> None:
            if not caller.may_supply_credential(call):
                raise ApiError(
                    403,
                    f"only the ticket's own user may supply its credential, not {caller.subject!r}",
                )

        # The credential itself is never kept, dead-lettered or not.
        call = await ticket_for_post(api, caller, call_id, {}, kind="credential")
        check(call)
        # Checked again on the record the post reads, which names the request answered.
        entry_id = await asyncio.to_thread(
            api.completions.supply_credential,
            call_id,
            body.credential,
            api.credentials,
            source="http",
            check=check,
            asked=body.asked_again,
            credential_key=body.credential_key,
        )
        return Accepted(
            call_id=call_id,
            session_id=call.session_id,
            final=True,
            entry_id=entry_id,
            detail="credential stored; the call runs again and the agent resumes",
        )

    for verb, status in (("approve", "approved"), ("reject", "rejected")):
        router.add_api_route(
            f"/{{call_id}}/{verb}",
            _decision_route(post, authorize, status),
            methods=["POST"],
            status_code=202,
            response_model=Accepted,
            responses=completion_errors,
            summary=f'Post the final result {{"status": "{status}"}}',
            name=f"{verb}_ticket",
            operation_id=f"{verb}_ticket",
        )
    return router


Authorize = Callable[
    [Caller, str, Callable[[PendingCall], bool], str, dict[str, Any]],
    Awaitable[PendingCall | None],
]
Post = Callable[[str, dict[str, Any], bool, PendingCall | None], Awaitable[Accepted]]


def _decision_route(
    post: Post,
    authorize: Authorize,
    status: str,
) -> Callable[..., Awaitable[Accepted]]:
    async def decide(call_id: CallId, caller: Who, body: Decision | None = None) -> Accepted:
        response: dict[str, Any] = {"status": status}
        if body is not None and body.note:
            response["note"] = body.note
        need = "decide (it needs approver:<app>)"
        known = await authorize(caller, call_id, caller.may_decide, need, response)
        return await post(call_id, response, True, known)

    return decide


def timeline_link(call: PendingCall) -> str:
    """The timeline page of `call`'s session, relative to the API's root."""
    query = urlencode({"app": call.app_name, "user": call.user_id, "session": call.session_id})
    return f"timeline?{query}"


def health_router(api: HttpApi) -> APIRouter:
    """`GET /health`, outside the token check: `ok`, `degraded` when a pool the agents need
    has no live worker, or 503 when Redis does not answer within HEALTH_TIMEOUT_S."""
    router = APIRouter(tags=["health"])

    @router.get(
        "/health",
        response_model=Health,
        responses={503: {"model": Health, "description": "Redis is unreachable"}},
        summary="Redis reachable, live workers per pool (no token needed)",
    )
    async def health() -> Any:
        agents = sorted(api.orch.runners)
        needed = api.tools.needed_pools()
        try:
            async with asyncio.timeout(HEALTH_TIMEOUT_S):
                await api.redis.ping()
                workers = await live_workers(api.redis, api.keys)
        except (TimeoutError, redis.RedisError) as exc:
            down = Health(
                status="unavailable",
                redis=False,
                detail=f"Redis is unreachable: {exc or 'no answer'}",
                replica_id=api.orch.replica_id,
                agents=agents,
                pools={},
            )
            return JSONResponse(down.model_dump(), status_code=503)
        pools = {
            pool: PoolHealth(workers=sum(pool in w.pools for w in workers), needed=pool in needed)
            for pool in sorted(needed | {p for w in workers for p in w.pools})
        }
        missing = [p for p, h in pools.items() if h.needed and not h.workers]
        detail = f"no live worker serves pool {', '.join(missing)}" if missing else "ok"
        return Health(
            status="degraded" if missing else "ok",
            redis=True,
            detail=detail,
            replica_id=api.orch.replica_id,
            agents=agents,
            pools=pools,
        )

    return router
