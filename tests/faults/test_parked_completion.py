"""A parked turn completed by its last answer: a fault before the step that stores the
turn's responses loses none of them, and the answer applied again runs nothing twice
and leaves nothing behind."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from tests.support import InProcessRunner
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.completions.applier import GROUP, CompletionApplier
from toolfleet.orchestrator.completions.entries import PostedEntry
from toolfleet.orchestrator.completions.resumer import BackgroundTasks, SessionResumer
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.shared.completions import Completions
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys, session_key
from toolfleet.shared.tools import FunctionTool

RUNS: dict[str, int] = {}


def pay(amount: int) -> dict[str, int]:
    """Pays `amount`."""
    RUNS["pay"] = RUNS.get("pay", 0) + 1
    return {"paid": amount}


def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


class Fault(Exception):
    pass


@pytest.fixture
def prefixed(settings: Settings) -> Iterator[tuple[Settings, redis.Redis]]:
    prefix = f"{settings.key_prefix}-parked-{uuid.uuid4().hex[:6]}"
    client = redis.Redis.from_url(settings.require_redis_url())
    yield settings.model_copy(update={"key_prefix": prefix}), client
    for key in client.scan_iter(f"{prefix}*"):
        client.delete(key)
    client.close()


async def test_a_fault_before_the_parked_turns_responses_are_stored_loses_none(
    prefixed: tuple[Settings, redis.Redis],
) -> None:
    settings, sync = prefixed
    keys = Keys(settings.key_prefix)
    RUNS.clear()
    model = ScriptedModel(
        [call(Call("pay", {"amount": 5}), Call("add", {"a": 1, "b": 1})), say("done")]
    )
    tools: list[Any] = [FunctionTool(pay, require_confirmation=True), FunctionTool(add)]
    agent = Agent(name="app", tools=tools, model=model)
    async with Runner(agent, settings, tool_runner=InProcessRunner(), model=model) as runner:
        # Given a turn parked on pay's confirmation, add's result kept, and the yes posted
        session_id = uuid.uuid4().hex
        await runner.ask(user_id="u", session_id=session_id, message="go")
        key = session_key("app", "u", session_id)
        (request,) = await runner.store.pending_calls(key)
        stream = keys.completions("app")
        sync.xgroup_create(stream, GROUP, id="0", mkstream=True)
        entry_id = Completions(sync, keys).confirm(request.call_id, True)
        resumer = SessionResumer({"app": runner}, BackgroundTasks())
        applier = CompletionApplier({"app": runner}, runner.store._redis, keys, resumer, "r-1")

        def entry() -> PostedEntry:
            entries: Any = sync.xrange(stream, entry_id, entry_id)
            ((_, fields),) = entries
            return PostedEntry.read(entry_id, fields, 64)

        # When the step that stores the turn's responses fails
        real_append = runner.store.append

        async def failing_append(*args: Any, **kwargs: Any) -> None:
            raise Fault("the connection dropped before the responses were stored")

        runner.store.append = failing_append  # type: ignore[method-assign]
        with pytest.raises(Fault):
            await applier.apply(stream, entry())
        runner.store.append = real_append  # type: ignore[method-assign]

        # Then the turn is as it was: its answer is still to apply, the call still waits
        assert sync.hget(keys.pending(), request.call_id) is not None
        assert sync.xrange(stream, entry_id, entry_id)
        # And applied again (a takeover), every call of the turn gets its response, once
        await applier.apply(stream, entry())
        session = await runner.store.get(key)
        parts = [p for e in session.events if e.content for p in e.content.parts or ()]
        calls = {p.function_call.id for p in parts if p.function_call}
        answered = [p.function_response.id or "" for p in parts if p.function_response]
        assert len(calls) == 2 and sorted(answered) == sorted(calls)
        assert not list(sync.scan_iter(f"{settings.key_prefix}:parked*"))
        assert sync.hget(keys.pending(), request.call_id) is None
