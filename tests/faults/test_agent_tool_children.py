"""An agent tool's child session never keeps a call without a response, however its run
ends: its worker killed mid-turn (the sweep closes the turn once the child's lease lapses)
or its time limit reached (the worker closes it itself). The parent's call is answered
once, by the timeout or the worker's error; the child's open calls get error responses
saying why, the child owes nothing, and listing the user's sessions shows none open.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.faults import probe
from tests.faults.agent_tool_delivery import deliver
from tests.faults.exactly_once_tools import hurried_delegator, lost_delegator, work_delegator
from tests.faults.replicas import started
from tests.faults.test_orchestrator_faults import toolfleet_env
from tests.support import until
from toolfleet import Event, Runner, Settings
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.models.protocol import function_calls
from toolfleet.orchestrator.service.orchestrator import Orchestrator
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.shared.keys import Keys, session_key


def child_session(client: redis.Redis, keys: Keys, app: str, parent: str) -> Session | None:
    """The user's one child session of `parent`, as stored (None until it exists)."""
    ids = [i.decode() for i in client.smembers(keys.user_sessions(app, "u"))]
    children = [i for i in ids if i.startswith(f"{parent}.")]
    if not children:
        return None
    (child_id,) = children
    raw = client.lrange(keys.events(session_key(app, "u", child_id)), 0, -1)
    return Session(child_id, app, "u", [Event.model_validate_json(e) for e in raw])


def calls_out(session: Session | None) -> bool:
    return session is not None and any(
        function_calls(e.content) for e in session.events if e.content
    )


def responses(session: Session) -> dict[str, list[dict[str, Any]]]:
    """Every function response of the session, by call id."""
    found: dict[str, list[dict[str, Any]]] = {}
    for event in session.events:
        for response in event.get_function_responses():
            found.setdefault(response.id or "", []).append(dict(response.response or {}))
    return found


def assert_closed(session: Session, error_type: str, why: str) -> None:
    """Every call of the child has one response; the one its run left open says why."""
    assert session.open_turn() is None
    calls = [c.id or "" for e in session.events if e.content for c in function_calls(e.content)]
    answered = responses(session)
    assert calls and all(len(answered.get(c, [])) == 1 for c in calls), answered
    (response,) = answered[calls[-1]]
    assert response["status"] == "error", response
    assert response["error_type"] == error_type, response
    assert why in response["error_message"], response


@pytest.mark.timeout(90)
async def test_a_child_whose_agent_tool_reaches_its_time_limit_is_closed_by_its_worker(
    settings: Settings, client: redis.Redis
) -> None:
    keys = Keys(settings.key_prefix)
    with WorkerGroup(settings) as workers:
        workers.start(["default"], concurrency=2)
        workers.start(["agents"], concurrency=1)
        # No orchestrator sweeps here: only the worker can close the child's turn.
        async with Runner(hurried_delegator, settings) as runner:
            answer = await runner.ask(user_id="u", session_id="p", message="go")
        assert answer.startswith("hurried_researcher: {'status': 'error'"), answer

        def closed() -> bool:  # it may post the parent's timeout before it closes the child
            child = child_session(client, keys, "hurried_delegator", "p")
            return child is not None and child.open_turn() is None

        await until(closed, "the worker to close the child's open turn", 30)
    child = child_session(client, keys, "hurried_delegator", "p")
    assert child is not None
    assert_closed(child, "AgentToolEnded", "agent tool 'hurried_researcher' was stopped")
    assert not client.sismember(keys.resume(), child.id)


@pytest.mark.timeout(90)
async def test_a_child_whose_worker_is_killed_mid_turn_is_closed_by_the_sweep(
    settings: Settings, client: redis.Redis
) -> None:
    # Last in the module: the killed worker's call stays in the agents queue (shared by
    # the module's tests) until the module's server goes.
    keys = Keys(settings.key_prefix)
    with WorkerGroup(settings) as workers:
        workers.start(["default"], concurrency=2)
        agents_worker = workers.start(["agents"], concurrency=1)
        async with Orchestrator([lost_delegator], settings) as orch:
            runner = orch.runner("lost_delegator")
            asking = asyncio.create_task(runner.ask(user_id="u", session_id="p", message="go"))
            await until(
                lambda: calls_out(child_session(client, keys, "lost_delegator", "p")),
                "the child's lookup to be sent",
                30,
            )
            agents_worker.kill()  # mid-turn: the child's lookup runs on the default worker
            answer = await asyncio.wait_for(asking, 30)
            # The parent's call was answered otherwise (no worker is left to run it again).
            assert answer.startswith("lost_researcher: {'status': 'error'"), answer

            def closed() -> bool:
                child = child_session(client, keys, "lost_delegator", "p")
                return child is not None and child.open_turn() is None

            await until(closed, "the sweep to close the child's open turn", 30)
    child = child_session(client, keys, "lost_delegator", "p")
    assert child is not None
    assert_closed(child, "WorkerLost", "the worker running agent tool 'lost_researcher' was lost")
    assert not client.sismember(keys.resume(), child.id)


@pytest.mark.timeout(90)
async def test_an_agent_tool_call_delivered_again_goes_on_with_its_child(
    settings: Settings, client: redis.Redis, tmp_path: Path
) -> None:
    """Its first delivery's worker is killed while the child's call runs: the next
    delivery does not send the request to the child again - it collects the child's
    call (run once) and returns the child's answer."""
    keys = Keys(settings.key_prefix)
    call_id = "agent-call-1"
    child = session_key("delegating", "u", f"parent.{call_id}")
    with WorkerGroup(settings) as workers:
        workers.start(["default"], concurrency=2)
        with (tmp_path / "first.log").open("wb") as log:
            first = started(subprocess.Popen(
                [sys.executable, "-m", "tests.faults.agent_tool_delivery", call_id],
                env=toolfleet_env(settings), stdout=log, stderr=subprocess.STDOUT,
            ))  # fmt: skip

        def child_call_running() -> bool:
            events = client.lrange(keys.events(child), 0, -1)
            contents = [c for c in map(_content, events) if c is not None]
            calls = [c.id or "" for content in contents for c in function_calls(content)]
            return bool(calls) and probe.executions(client, settings.key_prefix, calls[0]) == 1

        await until(child_call_running, "the child's call to run", 60)
        first.send_signal(signal.SIGKILL)
        first.wait(10)

        answer = await deliver(call_id, settings)  # the broker's next delivery

    assert answer == "researched: yes"
    events = [Event.model_validate_json(e) for e in client.lrange(keys.events(child), 0, -1)]
    assert [e.author for e in events if e.author == "user"] == ["user"]  # asked once
    calls = [c.id or "" for e in events if e.content for c in function_calls(e.content)]
    assert len(calls) == 1
    assert probe.executions(client, settings.key_prefix, calls[0]) == 1


def _content(raw: bytes) -> Any:
    event = Event.model_validate_json(raw)
    return event.content if event.content is not None else None


@pytest.mark.timeout(90)
async def test_cancelling_the_parent_stops_the_calls_its_agent_tools_child_runs(
    settings: Settings, client: redis.Redis
) -> None:
    """The child's call runs on another worker than the agent tool: the session's
    cancellation stops it too, as it stops the session's own calls."""
    keys = Keys(settings.key_prefix)
    with WorkerGroup(settings) as workers:
        workers.start(["default"], concurrency=2)
        workers.start(["agents"], concurrency=1)
        async with Runner(work_delegator, settings) as runner:
            running = asyncio.create_task(runner.ask(user_id="u", session_id="p", message="go"))

            def child_calls() -> list[str]:
                found = child_session(client, keys, "work_delegator", "p")
                events = found.events if found is not None else []
                return [c.id or "" for e in events if e.content for c in function_calls(e.content)]

            def child_call_running() -> bool:
                ids = child_calls()
                return bool(ids) and probe.executions(client, settings.key_prefix, ids[0]) == 1

            await until(child_call_running, "the child's call to run", 60)
            await runner.cancel(user_id="u", session_id="p")
            await asyncio.wait_for(running, 30)
        (call_id,) = child_calls()
        # Past the work's own 4 s: it was stopped, and never ended.
        await asyncio.sleep(5)  # ok: waits out the time the call would take to end
    assert probe.executions(client, settings.key_prefix, f"{call_id}:ended") == 0
