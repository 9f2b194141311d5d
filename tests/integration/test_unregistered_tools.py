"""A call of a tool that no worker of its pool registered (its module missing from their
TOOLFLEET_TOOL_MODULES) is answered at once with an error saying what to change, by the
orchestrator from the heartbeats, or by a worker that takes its message anyway."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import pytest
import redis
import redis.asyncio as aioredis
from google.genai import types

from tests.integration import sparse_tools, unregistered_tools
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.local_workers import WorkerGroup, WorkerSpec
from toolfleet.orchestrator.fleet.dispatch import CeleryPublisher
from toolfleet.orchestrator.fleet.pools import live_workers
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.shared.call_signing import CallSigner
from toolfleet.shared.config import Settings
from toolfleet.shared.discovery import tools_in_module
from toolfleet.shared.keys import Keys, queue_name
from toolfleet.shared.messages import RESULT_FIELD, ToolCall, ToolResult

pytestmark = pytest.mark.integration

TOOLS = [*tools_in_module(sparse_tools), *tools_in_module(unregistered_tools)]
WAIT_S = 20.0


@pytest.fixture(scope="module")
def sparse(settings: Settings) -> Iterator[Settings]:
    """A prefork worker of pool `sparse` and an io worker (intake) of pool `sparse_io`,
    both loading sparse_tools only, under a key prefix of their own."""
    own = settings.model_copy(
        update={
            "key_prefix": f"{settings.key_prefix}-sparse",
            "tool_modules": ["tests.integration.sparse_tools"],
            "io_pools": ["sparse_io"],
        }
    )
    with WorkerGroup(own) as group:
        group.start_all(
            [WorkerSpec(["sparse"], 1, "sparse1"), WorkerSpec(["sparse_io"], 4, "sio1")]
        )
        yield own


async def run_turn(settings: Settings, *calls: Call) -> list[types.FunctionResponse]:
    agent = Agent(name="sparse_agent", tools=TOOLS, model=ScriptedModel([call(*calls), say("ok")]))
    async with Runner(agent, settings) as runner:
        updates = [
            u async for u in runner.run(user_id="u1", session_id=uuid.uuid4().hex, message="go")
        ]
    (event,) = [u for u in updates if isinstance(u, Event) and u.calls][:1]
    assert event.content is not None
    return [p.function_response for p in event.content.parts or () if p.function_response]


async def test_workers_advertise_the_tools_they_registered(sparse: Settings) -> None:
    client = aioredis.Redis.from_url(sparse.require_redis_url())
    workers = {
        w.hostname.split("@")[0]: w for w in await live_workers(client, Keys(sparse.key_prefix))
    }
    await client.aclose()
    assert workers["sparse1"].tools == ["present", "present_io"]
    assert workers["sio1"].tools == ["present", "present_io"]


@pytest.mark.parametrize(("tool", "pool"), [("absent", "sparse"), ("absent_io", "sparse_io")])
async def test_a_tool_no_worker_of_its_pool_registered_is_answered_at_once(
    sparse: Settings, tool: str, pool: str
) -> None:
    started = time.monotonic()
    missing, served = await run_turn(
        sparse, Call(tool, {"word": "lost"}), Call(f"present{pool[6:]}", {"word": "kept"})
    )
    assert time.monotonic() - started < sparse.default_timeout_s  # not left to time out
    assert served.response == {"word": "kept"}
    assert missing.response == {
        "status": "error",
        "error_type": "ToolNotRegisteredError",
        "error_message": (
            f"no live worker of pool {pool} has tool {tool!r}: it is unavailable until its "
            f"module is added to TOOLFLEET_TOOL_MODULES on the workers of pool {pool}"
        ),
    }


@pytest.mark.parametrize(("tool", "pool"), [("absent", "sparse"), ("absent_io", "sparse_io")])
async def test_a_worker_answers_a_message_of_a_tool_it_does_not_have(
    sparse: Settings, tool: str, pool: str
) -> None:
    """Its message sent anyway (as before the worker restarted with fewer modules): the
    worker posts an error result and closes the call, rather than drop it unanswered."""
    keys = Keys(sparse.key_prefix)
    stream = f"{sparse.key_prefix}:results:race-{uuid.uuid4().hex[:6]}"
    envelope = ToolCall(
        call_id=uuid.uuid4().hex, tool=tool, args={"word": "raced"}, session_id="s-race",
        app_name="sparse_agent", user_id="u1", invocation_id="i", agent="sparse_agent",
        state={}, reply_to=stream, dispatched_at=time.time(),
    )  # fmt: skip
    client = aioredis.Redis.from_url(sparse.require_redis_url())
    publisher = CeleryPublisher(client, signer=CallSigner.of(sparse.fleet_key))
    await publisher.publish(
        [publisher.dispatch(envelope, queue_name(pool))], record_in=f"{stream}:sent"
    )
    await client.aclose()

    with redis.Redis.from_url(sparse.require_redis_url()) as sync:
        entries = sync.xread({stream: "0"}, count=1, block=int(WAIT_S * 1000))
        assert entries, f"no answer on {stream} within {WAIT_S} s"
        [(_, [(_, fields)])] = entries
        result = ToolResult.model_validate(json.loads(fields[RESULT_FIELD.encode()]))
        assert sync.exists(keys.closed(envelope.session_key, envelope.call_id))
    assert result.call_id == envelope.call_id and result.status == "error"
    assert result.response["error_type"] == "ToolNotRegisteredError"
    assert result.response["error_message"].startswith(
        f"tool {tool!r} is not registered on worker "
    )
    assert result.response["error_message"].endswith(
        f"of pool {pool}: add its module to TOOLFLEET_TOOL_MODULES on the workers of pool {pool}"
    )
