"""ADK-style programs on real workers: model id strings (an AgentTool's parent and
child), the reference's toolset and ADK's prefix, a BaseTool, automatic transfer, and
a broken toolset that stops no worker."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest
import redis

from tests.integration import adk_tools
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.loop.invocation import CallFinished, Update
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.sessions.events import Event, answer_of
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys, session_key

pytestmark = pytest.mark.integration


async def run(agent: Agent, settings: Settings, message: str) -> tuple[list[Update], str]:
    session_id = uuid.uuid4().hex
    async with Runner(agent, settings) as runner:
        updates = [
            u async for u in runner.run(user_id="u1", session_id=session_id, message=message)
        ]
    return updates, session_id


def answers(updates: list[Update]) -> list[tuple[str, str]]:
    return [(u.author, answer_of(u)) for u in updates if isinstance(u, Event) and answer_of(u)]


async def test_model_id_strings_run_an_agent_tools_parent_and_child_on_the_fleet(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str]
) -> None:
    updates, _ = await run(adk_tools.counting_agent, settings, "count these four words")
    (result,) = [u.result for u in updates if isinstance(u, CallFinished)]
    assert result.tool == "adk_word_counter" and result.worker.startswith("w5@")
    assert result.response == {"result": "4 words"}
    assert answers(updates)[-1] == ("adk_counting", "The helper says: 4 words")


async def test_a_users_base_llm_runs_an_agent_tools_agent_on_a_worker(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str]
) -> None:
    updates, _ = await run(adk_tools.llm_counting_agent, settings, "count these four words")
    (result,) = [u.result for u in updates if isinstance(u, CallFinished)]
    assert result.tool == "adk_llm_counter" and result.worker.startswith("w5@")
    counted = 'adk_count_words: {"words": 4} (by rule-counter)'
    assert result.response == {"result": counted}
    assert answers(updates)[-1] == ("adk_llm_counting", f"The helper says: {counted}")


async def test_the_reference_toolset_adks_prefix_and_a_base_tool_run_on_workers(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str]
) -> None:
    updates, _ = await run(adk_tools.calculator_agent, settings, "go")
    results = {u.result.tool: u.result for u in updates if isinstance(u, CallFinished)}
    assert results["adkcalc_add_numbers"].response == {"status": "success", "result": 8}
    assert results["adk_adk_count_words"].response == {"words": 3}
    stock = results["adk_stock_price"]
    assert stock.response["price"] == 42.0 and stock.response["call"] == stock.call_id
    assert all(r.worker.split("@")[0] in {"w1", "w2", "w6"} for r in results.values())
    # The module's broken toolset was named in the logs and stopped no worker.
    assert all(w.alive() for w in fleet.workers)
    logs = "".join(w.log() for w in fleet.workers)
    assert "broken_toolset (BrokenToolset) cannot list its tools" in logs


async def test_the_model_transfers_on_its_own_on_the_fleet(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str]
) -> None:
    updates, session_id = await run(adk_tools.adk_desk, settings, "this is urgent")
    assert answers(updates)[-1] == ("adk_support", "Support here (4 words).")
    (handover, _) = [u for u in updates if isinstance(u, Event) and u.calls]
    assert [c.tool for c in handover.calls] == ["adk_subtract_numbers", "transfer_to_agent"]
    assert [c.worker.split("@")[0] for c in handover.calls][1] == "orchestrator"
    assert handover.actions.transfer_to_agent == "adk_support"

    client = redis.Redis.from_url(settings.require_redis_url())
    keys = Keys(settings.key_prefix)
    events = keys.events(session_key(adk_tools.adk_desk.name, "u1", session_id))
    stored = [json.loads(raw) for raw in client.lrange(events, 0, -1)]
    client.close()
    # One stored event holds both responses: the transfer's was stored in the same step.
    (both,) = [e for e in stored if len(e.get("calls") or []) == 2]
    assert [c["tool"] for c in both["calls"]] == ["adk_subtract_numbers", "transfer_to_agent"]


def test_toolfleet_run_takes_a_model_id_and_says_why_it_runs_offline(
    fleet: WorkerGroup, orchestrator_env: dict[str, str]
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "toolfleet", "run", "--agent",
         "tests.integration.adk_tools:counting_agent", "count these four words"],
        env=orchestrator_env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        "model: offline scripted model (no GOOGLE_API_KEY/GEMINI_API_KEY set; the agent "
        "names 'gemini-2.0-flash', which needs one)"
    ) in done.stdout
    assert "The helper says: 4 words" in done.stdout
