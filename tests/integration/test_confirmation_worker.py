"""A worker runs a call that needs a person's confirmation only when the call carries
one, whichever way it was sent: a path that sends it straight to the fleet gets an
error and nothing runs. A confirmed call that then asks for a credential keeps the
person's yes and runs once the credential is in. Real Redis and `celery worker`
processes; the tools count their runs in files."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.integration import confirm_tools
from tests.support import answers, assert_one_response_per_call
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.fleet.protocol import PlannedCall
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.orchestrator.replica import Replica
from toolfleet.orchestrator.service.orchestrator import Orchestrator
from toolfleet.shared.auth import CredentialStore
from toolfleet.shared.batch import WriteBatch
from toolfleet.shared.completions import Completions
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys, session_key
from toolfleet.shared.messages import CallStatus, ToolCall, ToolResult
from toolfleet.shared.tools import FunctionTool

pytestmark = pytest.mark.integration

WAIT_S = 30


async def sent_straight(
    settings: Settings,
    args: dict[str, Any],
    confirmation: dict[str, Any] | None,
    tool: FunctionTool = confirm_tools.transfer_money_tool,
) -> ToolResult:
    """`tool` sent to its pool as any new path might: no ticket, no question."""
    async with Replica(settings) as replica:
        session_id = f"straight-{uuid.uuid4().hex}"
        session = session_key("direct", "u1", session_id)
        envelope = ToolCall(
            call_id=uuid.uuid4().hex, tool=tool.name, args=args, session_id=session_id,
            app_name="direct", user_id="u1", invocation_id="inv", agent="none",
            reply_to=replica.keys.results(session), dispatched_at=time.time(),
            confirmation=confirmation,
        )  # fmt: skip
        planned = PlannedCall(envelope, tool)
        (result,) = [r async for r in replica.fleet.run([planned])]
        batch = WriteBatch()
        replica.fleet.stage_settle(session, batch)
        await batch.run(replica.redis)
    return result


async def test_a_call_sent_without_its_confirmation_is_refused_by_the_worker(
    settings: Settings, fleet: WorkerGroup, tmp_path: Path
) -> None:
    transfers = tmp_path / "transfers"
    args = {"amount": 5000, "counter_file": str(transfers)}

    bare = await sent_straight(settings, args, None)
    rejected = await sent_straight(settings, args, {"confirmed": False})

    for result in (bare, rejected):
        assert result.status is CallStatus.ERROR and result.worker != "orchestrator"
        assert result.response["error_type"] == "ConfirmationRequired"
    assert not transfers.exists()

    confirmed = await sent_straight(settings, args, {"confirmed": True, "hint": "ok"})
    assert confirmed.response == {"moved": 5000, "runs": 1, "confirmed": True}
    assert transfers.read_text() == "1"


async def test_an_io_workers_coroutine_tool_is_checked_the_same_way(
    settings: Settings, fleet: WorkerGroup, tmp_path: Path
) -> None:
    transfers = tmp_path / "transfers"
    later = confirm_tools.transfer_later_tool

    small = await sent_straight(
        settings, {"amount": 20, "counter_file": str(transfers)}, None, later
    )
    large = await sent_straight(
        settings, {"amount": 500, "counter_file": str(transfers)}, None, later
    )

    assert small.response == {"moved": 20, "runs": 1} and small.worker.startswith("w6@")
    assert large.response["error_type"] == "ConfirmationRequired"
    assert transfers.read_text() == "1"


async def test_a_confirmed_call_that_asks_for_a_credential_runs_once_it_is_given(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str], tmp_path: Path
) -> None:
    paid = tmp_path / "paid"
    model = ScriptedModel(
        [call(Call("pay_salary", {"amount": 3000, "counter_file": str(paid)})), say("done")]
    )
    agent = Agent(name="payroll", tools=[confirm_tools.pay_salary_tool], model=model)
    client = redis.Redis.from_url(settings.require_redis_url())
    keys = Keys(settings.key_prefix)
    completions = Completions(client, keys)
    session_id = uuid.uuid4().hex
    key = session_key(agent.name, "u1", session_id)

    async with Orchestrator([agent], settings, models={agent.name: model}) as orch:
        runner = orch.runner(agent.name)
        await runner.ask(user_id="u1", session_id=session_id, message="pay")
        (asked,) = await runner.store.pending_calls(key)
        assert asked.kind == "confirmation"
        completions.confirm(asked.call_id, True)

        async def waits_for_a_credential() -> bool:
            pending = await runner.store.pending_calls(key)
            return [p.kind for p in pending] == ["credential"]

        while not await waits_for_a_credential():
            orch.listener.handled.clear()
            await asyncio.wait_for(orch.listener.handled.wait(), WAIT_S)
        assert not paid.exists()  # confirmed, but no token yet
        store = CredentialStore(client, keys, settings.credential_key)
        completions.supply_credential(asked.call_id, "payroll-token", store)
        assert await orch.wait_until_settled(key, WAIT_S)
        session = await runner.store.get(key)
    client.close()

    assert [r for _, r in answers(session)] == [{"paid": 3000, "runs": 1, "confirmed": True}]
    assert paid.read_text() == "1"
    assert_one_response_per_call(session)
