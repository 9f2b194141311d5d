"""A worker runs a call that needs a person's confirmation only when the call carries
one, whichever way it was sent: a path that sends it straight to the fleet gets an
error and nothing runs. A confirmed call that then asks for a credential keeps the
person's yes and runs once the credential is in. With the fleet key, the yes must
be one an orchestrator signed: a message written to a queue claiming it is refused
unrun, and a signed message written again runs nothing. Real Redis and `celery worker`
processes; the tools count their runs in files."""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.integration import confirm_tools
from tests.support import answers, assert_one_response_per_call, until
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.fleet.dispatch import CeleryPublisher
from toolfleet.orchestrator.fleet.protocol import PlannedCall
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.orchestrator.replica import Replica
from toolfleet.orchestrator.service.orchestrator import Orchestrator
from toolfleet.shared.auth import CredentialStore
from toolfleet.shared.batch import WriteBatch
from toolfleet.shared.call_signing import CallSigner
from toolfleet.shared.completions import Completions
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys, queue_name, session_key
from toolfleet.shared.messages import CallStatus, ToolCall, ToolResult
from toolfleet.shared.sealing import Sealer
from toolfleet.shared.signing import new_fleet_key
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


def broker_message(
    settings: Settings, call: ToolCall, pool: str, key: str | None = None
) -> tuple[str, str]:
    """The task message of `call` on `pool`'s queue as an orchestrator with fleet key `key`
    sends it (None: none), and its task id."""
    signer = CallSigner.of(key)
    publisher = CeleryPublisher(None, settings.secret_arg_names, Sealer.of(settings), signer=signer)  # type: ignore[arg-type]
    raw = publisher.encode(publisher.dispatch(call, queue_name(pool)))
    return raw, str(json.loads(raw)["headers"]["id"])


def tampered(raw: str, **changes: Any) -> str:
    """A signed message whose call was changed after it was signed, its signature kept."""
    message = json.loads(raw)
    args, kwargs, embed = json.loads(base64.b64decode(message["body"]))
    kwargs["call"] = json.dumps({**json.loads(kwargs["call"]), **changes})
    body = json.dumps([args, kwargs, embed]).encode()
    return json.dumps({**message, "body": base64.b64encode(body).decode()})


def direct_call(settings: Settings, tool: str, args: dict[str, Any], **fields: Any) -> ToolCall:
    session_id = f"forged-{uuid.uuid4().hex}"
    return ToolCall(
        call_id=uuid.uuid4().hex, tool=tool, args=args, session_id=session_id,
        app_name="direct", user_id="u1", invocation_id="inv", agent="none",
        reply_to=Keys(settings.key_prefix).results(session_key("direct", "u1", session_id)),
        dispatched_at=time.time(), **fields,
    )  # fmt: skip


def refusal(fleet: WorkerGroup, task_id: str) -> str | None:
    """The line in which a worker refused the message `task_id`, if one did."""
    for worker in fleet.workers:
        for line in worker.log().splitlines():
            if "refused a message of task tool." in line and f"(id {task_id})" in line:
                return line
    return None


async def test_a_forged_message_claiming_a_persons_yes_is_refused_and_signed_calls_run(
    settings: Settings, fleet: WorkerGroup, tmp_path: Path
) -> None:
    """Whoever can write to a queue can claim a confirmation in a call's envelope; a worker
    with the fleet key runs only what an orchestrator signed, on a prefork worker's Celery
    pool and on an io worker's intake alike."""
    transfers = tmp_path / "transfers"
    yes = {"confirmed": True, "hint": "ok", "payload": None}
    money = {"amount": 5000, "counter_file": str(transfers)}
    later = {"amount": 500, "counter_file": str(transfers)}
    key = settings.fleet_key
    forgeries: dict[str, tuple[ToolCall, str, str]] = {}
    for tool, args, pool in (("transfer_money", money, "default"), ("transfer_later", later, "io")):
        claimed = direct_call(settings, tool, args, confirmation=yes)
        asked = direct_call(settings, tool, args)  # sent as it is before a person answered
        signed, _ = broker_message(settings, asked, pool, key)
        unsigned, unsigned_id = broker_message(settings, claimed, pool)
        other_key, other_id = broker_message(settings, claimed, pool, new_fleet_key())
        changed = tampered(signed, confirmation=yes)
        forgeries[f"{tool}, unsigned"] = (claimed, unsigned, unsigned_id)
        forgeries[f"{tool}, another key's"] = (claimed, other_key, other_id)
        forgeries[f"{tool}, changed after signing"] = (
            asked,
            changed,
            json.loads(changed)["headers"]["id"],
        )
    client = redis.Redis.from_url(settings.require_redis_url())
    for _, raw, _ in forgeries.values():
        queue = json.loads(raw)["properties"]["delivery_info"]["routing_key"]
        client.lpush(queue, raw)

    await until(
        lambda: all(refusal(fleet, task_id) for _, _, task_id in forgeries.values()),
        "the workers to refuse each forged message",
        WAIT_S,
    )
    for name, (forged, _, task_id) in forgeries.items():
        line = refusal(fleet, task_id) or ""
        assert "the tool did not run" in line, (name, line)
        expected = "carries no signature" if "unsigned" in name else "its signature is wrong"
        assert expected in line, (name, line)
        assert client.xlen(forged.reply_to) == 0, name  # not answered: nowhere it chose
    assert not transfers.exists()

    # The same workers run a call an orchestrator signed; a replay of it runs nothing.
    confirmed = await sent_straight(settings, money, yes)
    assert confirmed.response == {"moved": 5000, "runs": 1, "confirmed": True}
    genuine = direct_call(
        settings, "transfer_later", {"amount": 20, "counter_file": str(transfers)}
    )
    raw, _ = broker_message(settings, genuine, "io", key)
    client.lpush(queue_name("io"), raw)
    await until(lambda: client.xlen(genuine.reply_to) == 1, "the signed call's result", WAIT_S)
    client.lpush(queue_name("io"), raw, raw)  # captured, and written twice more
    replays = f"call {genuine.call_id} (transfer_later) was answered before it started"
    await until(
        lambda: sum(w.log().count(replays) for w in fleet.workers) == 2,
        "the worker to drop both replays",
        WAIT_S,
    )
    assert transfers.read_text() == "2"  # the confirmed transfer and the signed one, once
    assert client.xlen(genuine.reply_to) == 1
    client.close()
