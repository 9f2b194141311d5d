"""One ADK message on a session: a FunctionResponse part completes a pending
long-running call (posted and applied once, as a ticket's result) or answers an
`adk_request_confirmation`; other parts are the user's message, as toolfleet's Runner
runs it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from google.genai import types

from toolfleet.orchestrator.adkwire.posting import post_responses
from toolfleet.orchestrator.completions.applier import CompletionApplier
from toolfleet.orchestrator.completions.entries import PostedEntry
from toolfleet.orchestrator.completions.resumer import BackgroundTasks, SessionResumer
from toolfleet.orchestrator.loop.invocation import Update
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.shared.auth import CredentialStore
from toolfleet.shared.completions import Completions
from toolfleet.shared.keys import SessionKey, session_parts


async def run_message(
    runner: Runner,
    session: SessionKey,
    message: types.Content,
    state_delta: dict[str, Any] | None = None,
) -> AsyncIterator[Event]:
    """The events of `message` on the session: first those of the calls it completes
    (each response applied, then the resumed agent), then those of its other parts,
    stored with `state_delta` (the user's message event, then the agent's). A response
    completes only a call of this session: another's is not pending here."""
    parts = message.parts or []
    responses = [p.function_response for p in parts if p.function_response]
    if responses:
        async for event in _complete(runner, session, responses):
            yield event
    rest = [p for p in parts if not p.function_response]
    if rest or not responses:
        content = message.model_copy(update={"parts": rest})
        _, user_id, session_id = session_parts(session)
        run = runner.run(
            user_id=user_id, session_id=session_id, message=content, state_delta=state_delta
        )
        async for update in run:
            if isinstance(update, Event):
                yield update


async def _complete(
    runner: Runner, session: SessionKey, responses: list[types.FunctionResponse]
) -> AsyncIterator[Event]:
    """Post each response for its call, as ADK's client sends it: final unless it says
    more follow (`will_continue`). Then apply them through the apply-once path, with an
    intermediate response sent to the model as ADK does, and yield the agent's events."""
    completions = Completions.of(runner.replica.sync_client(), runner.keys, runner.settings)
    credentials = CredentialStore(
        runner.replica.sync_client(), runner.keys, runner.settings.credential_key
    )
    posted = await post_responses(completions, session, responses, credentials)
    entries = [entry_id for _, entry_id in posted]
    updates: asyncio.Queue[Update | None] = asyncio.Queue()

    def on_update(_session_id: str, update: Update) -> None:
        updates.put_nowait(update)

    apps = {runner.app_name: runner}
    # Only the applier's own continuation runs here: no sweep of owed sessions to start.
    resumer = SessionResumer(apps, BackgroundTasks(), on_update=on_update)
    applier = CompletionApplier(
        apps, runner.replica.redis, runner.keys, resumer, runner.replica.id, progress_to_model=True
    )
    stream = runner.keys.completions(runner.app_name)

    async def apply() -> None:
        try:
            # The last applies every earlier one of the session first, in order.
            found: Any = await runner.replica.redis.xrange(stream, entries[-1], entries[-1])
            if found:  # else another orchestrator's listener applied them already
                entry = PostedEntry.read(entries[-1], found[0][1], applier.max_json_depth)
                await applier.apply(stream, entry)
        finally:
            updates.put_nowait(None)

    applying = asyncio.create_task(apply())
    try:
        while (update := await updates.get()) is not None:
            if isinstance(update, Event):
                yield update
        await applying  # raises what applying raised
    finally:
        applying.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await applying
