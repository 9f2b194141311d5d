"""Confirmation before a call runs, on real workers: confirm, reject, an edited payload,
and the results of the turn's other calls kept through the wait. Runs are counted by
the tools themselves."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.integration import confirm_tools, fleet_tools
from tests.support import answers, assert_one_response_per_call
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli import main as cli
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, Step, call, say
from toolfleet.orchestrator.service.orchestrator import Orchestrator
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.shared.completions import Completions
from toolfleet.shared.config import Settings
from toolfleet.shared.discovery import tools_in_module
from toolfleet.shared.errors import CompletionError
from toolfleet.shared.keys import Keys, SessionKey, session_key
from toolfleet.shared.messages import PendingCall

pytestmark = pytest.mark.integration

WAIT_S = 30
TOOLS = [*tools_in_module(confirm_tools), fleet_tools.flaky]


class Confirming:
    """Runs a scripted agent on an orchestrator of its own; the operator's Completions."""

    def __init__(self, settings: Settings, completions: Completions) -> None:
        self.settings = settings
        self.completions = completions
        self.model = ScriptedModel([])
        self._exit = AsyncExitStack()
        self.orch: Orchestrator | None = None

    async def ask(self, *steps: Step, **agent: Any) -> tuple[SessionKey, list[PendingCall]]:
        """Start an orchestrator whose model plays `steps` (its agent given `agent`'s
        options besides); run one message on a new session of user u1: its key and
        pending calls."""
        self.model = ScriptedModel(list(steps))
        agent = Agent(name="confirming", tools=TOOLS, model=self.model, **agent)
        orch = Orchestrator([agent], self.settings, models={"confirming": self.model})
        self.orch = await self._exit.enter_async_context(orch)
        runner = self.orch.runner("confirming")
        session_id = uuid.uuid4().hex
        await runner.ask(user_id="u1", session_id=session_id, message="go")
        key = session_key("confirming", "u1", session_id)
        return key, await runner.store.pending_calls(key)

    async def settled(self, key: SessionKey) -> Session:
        """The session once the completions listener applied everything and it is idle."""
        assert self.orch is not None
        assert await self.orch.wait_until_settled(key, WAIT_S)
        return await self.orch.runner("confirming").store.get(key)

    async def handled(self, done: Callable[[], bool]) -> None:
        """Wait until `done()` says so, checked after each completion the listener handles."""
        assert self.orch is not None
        listener = self.orch.listener

        async def until_done() -> None:
            while True:
                listener.handled.clear()
                if done():
                    return
                await listener.handled.wait()

        await asyncio.wait_for(until_done(), WAIT_S)

    async def close(self) -> None:
        """Stop the orchestrator."""
        await self._exit.aclose()


@pytest.fixture
async def confirming(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str]
) -> AsyncIterator[Confirming]:
    client = redis.Redis.from_url(settings.require_redis_url())
    confirming = Confirming(settings, Completions(client, Keys(settings.key_prefix)))
    yield confirming
    await confirming.close()
    client.close()


async def test_confirmed_call_runs_once_and_its_sibling_result_survives_the_wait(
    confirming: Confirming, tmp_path: Path
) -> None:
    transfers, sibling = tmp_path / "transfers", tmp_path / "sibling"
    session_id, (request,) = await confirming.ask(
        call(
            Call("transfer_money", {"amount": 50, "counter_file": str(transfers)}),
            Call("flaky", {"counter_file": str(sibling), "failures": 0}),
        ),
        say("done"),
    )
    assert request.kind == "confirmation" and request.tool == "transfer_money"
    assert "approve or reject" in request.ticket["hint"]
    assert not transfers.exists()  # not sent to any worker
    assert sibling.read_text() == "1"  # the sibling ran during the wait
    assert len(confirming.model.requests) == 1  # the model has seen no response yet
    with pytest.raises(CompletionError, match="waits for a confirmation"):
        confirming.completions.post_result(request.call_id, {"ok": True})

    confirming.completions.confirm(request.call_id, True)
    session = await confirming.settled(session_id)

    responses = [r for _, r in answers(session)]
    assert responses == [{"moved": 50, "runs": 1, "confirmed": True}, {"runs": 1}]
    assert transfers.read_text() == "1" and sibling.read_text() == "1"
    assert len(confirming.model.requests) == 2  # all responses of the turn, once
    assert_one_response_per_call(session)


async def test_a_confirmed_call_runs_through_its_tool_callbacks_again(
    confirming: Confirming, tmp_path: Path
) -> None:
    """As in ADK: confirmed, the call runs through before_tool again (its clamp applies to
    what runs, and it sees the person's answer), and after_tool gets the final response."""
    transfers = tmp_path / "transfers"
    seen: list[bool | None] = []

    def clamp(tool: Any, args: dict[str, Any], tool_context: Any) -> None:
        confirmation = tool_context.tool_confirmation
        seen.append(confirmation.confirmed if confirmation else None)
        args["amount"] = min(args["amount"], 100)

    def stamp(tool: Any, args: dict[str, Any], tool_context: Any, tool_response: Any) -> Any:
        return {**tool_response, "checked": True}

    key, (request,) = await confirming.ask(
        call(Call("transfer_money", {"amount": 5000, "counter_file": str(transfers)})),
        say("done"),
        before_tool_callback=clamp,
        after_tool_callback=stamp,
    )
    assert seen == [None] and not transfers.exists()

    confirming.completions.confirm(request.call_id, True)
    session = await confirming.settled(key)

    assert seen == [None, True]
    (response,) = [r for _, r in answers(session)]
    assert response == {"moved": 100, "runs": 1, "confirmed": True, "checked": True}


async def test_a_before_tool_callback_may_answer_a_confirmed_call_in_its_place(
    confirming: Confirming, tmp_path: Path
) -> None:
    transfers = tmp_path / "transfers"

    def limit(tool: Any, args: dict[str, Any], tool_context: Any) -> dict[str, Any] | None:
        if tool_context.tool_confirmation is None:
            return None  # asked of a person first
        return {"status": "error", "error_message": "over today's limit"}

    key, (request,) = await confirming.ask(
        call(Call("transfer_money", {"amount": 5000, "counter_file": str(transfers)})),
        say("done"),
        before_tool_callback=limit,
    )
    confirming.completions.confirm(request.call_id, True)
    session = await confirming.settled(key)

    (response,) = [r for _, r in answers(session)]
    assert response == {"status": "error", "error_message": "over today's limit"}
    assert not transfers.exists()  # never sent to a worker


async def test_rejected_call_gets_one_error_and_never_runs(
    confirming: Confirming, tmp_path: Path
) -> None:
    transfers = tmp_path / "transfers"
    session_id, (request,) = await confirming.ask(
        call(Call("transfer_checked", {"amount": 500, "counter_file": str(transfers)})),
        say("ok"),
    )
    confirming.completions.confirm(request.call_id, False)
    session = await confirming.settled(session_id)

    ((_, response),) = answers(session)
    assert response["status"] == "error" and response["error_type"] == "ConfirmationRejected"
    assert not transfers.exists()
    with pytest.raises(CompletionError, match="was already answered: rejected"):
        confirming.completions.confirm(request.call_id, True)
    assert_one_response_per_call(session)


async def test_a_check_that_says_no_sends_the_call_at_once(
    confirming: Confirming, tmp_path: Path
) -> None:
    transfers = tmp_path / "transfers"
    session_id, pending = await confirming.ask(
        call(Call("transfer_checked", {"amount": 20, "counter_file": str(transfers)})),
        say("ok"),
    )
    assert pending == []
    session = await confirming.settled(session_id)
    assert [r for _, r in answers(session)] == [{"moved": 20, "runs": 1, "confirmed": None}]


async def test_a_tool_asks_itself_and_gets_the_payload_as_the_person_edited_it(
    confirming: Confirming, tmp_path: Path
) -> None:
    trips = tmp_path / "trips"
    session_id, (request,) = await confirming.ask(
        call(Call("book_trip", {"city": "Oslo", "counter_file": str(trips)})),
        say("asked"),
        say("booked"),
    )
    assert request.ticket == {"hint": "Book a trip to Oslo?", "confirmed": False} | {
        "payload": {"city": "Oslo", "nights": 2}
    }
    # As in ADK, the model got the tool's interim response and answered it already.
    assert len(confirming.model.requests) == 2
    confirming.completions.confirm(request.call_id, True, payload={"city": "Oslo", "nights": 5})
    session = await confirming.settled(session_id)
    # The interim response, then the final one of the run the person confirmed.
    assert answers(session) == [
        (request.call_id, {"status": "awaiting approval"}),
        (request.call_id, {"booked": {"city": "Oslo", "nights": 5}, "runs": 1}),
    ]
    assert len(confirming.model.requests) == 3 and trips.read_text() == "1"


async def test_an_answer_posted_twice_does_not_answer_the_question_asked_next(
    confirming: Confirming, tmp_path: Path
) -> None:
    """Two approvers (or a double submit) confirm the same request: the first answer runs
    the tool, which asks again; the second, given for the first question, is refused and
    kept as a dead letter, and the call waits for an answer to the question it asks now."""
    stays = tmp_path / "stays"
    session_id, (request,) = await confirming.ask(
        call(Call("book_long_stay", {"city": "Oslo", "counter_file": str(stays)})),
        say("asked"),
        say("asked again"),
        say("booked"),
    )
    client = redis.Redis.from_url(confirming.settings.require_redis_url())
    keys = Keys(confirming.settings.key_prefix)
    letters_before = client.xlen(keys.dead_letters())
    long_stay = {"city": "Oslo", "nights": 5}
    confirming.completions.confirm(request.call_id, True, payload=long_stay)
    confirming.completions.confirm(request.call_id, True, payload=long_stay)
    # Both are handled once the second is refused: the call waits again meanwhile.
    await confirming.handled(lambda: client.xlen(keys.dead_letters()) > letters_before)
    asked_again = confirming.completions.get(request.call_id)
    assert asked_again.asked_again == 1
    assert asked_again.ticket["payload"]["long_stay_ok"] is True
    ((_, letter),) = client.xrange(keys.dead_letters())[letters_before:]
    assert b"asked again since this answer was posted" in letter[b"reason"]
    assert not stays.exists()  # booked by neither answer
    confirming.completions.confirm(request.call_id, True)  # the question asked now
    session = await confirming.settled(session_id)
    assert answers(session)[-1] == (
        request.call_id,
        {"booked": {"city": "Oslo", "nights": 5, "long_stay_ok": True}, "runs": 1},
    )
    client.close()


async def test_the_cli_lists_a_confirmation_with_its_hint_and_confirms_an_edited_payload(
    confirming: Confirming, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trips = tmp_path / "trips"
    session_id, (request,) = await confirming.ask(
        call(Call("book_trip", {"city": "Rome", "counter_file": str(trips)})),
        say("asked"),
        say("booked"),
    )
    # The exact code paths of `toolfleet tickets list` and `toolfleet tickets confirm`.
    await asyncio.to_thread(cli.main, ["tickets", "list"])
    listed = capsys.readouterr().out
    assert f"{request.call_id}" in listed and "book_trip (confirmation)" in listed
    assert 'hint: Book a trip to Rome?  payload: {"city": "Rome", "nights": 2}' in listed

    edited = json.dumps({"city": "Rome", "nights": 3})
    await asyncio.to_thread(cli.main, ["tickets", "confirm", request.call_id, "--payload", edited])
    session = await confirming.settled(session_id)
    assert [r for _, r in answers(session)][-1] == {
        "booked": {"city": "Rome", "nights": 3},
        "runs": 1,
    }


async def test_a_confirmation_survives_a_restart_of_the_orchestrator(
    confirming: Confirming, settings: Settings, tmp_path: Path
) -> None:
    transfers = tmp_path / "transfers"
    session_id, (request,) = await confirming.ask(
        call(Call("transfer_money", {"amount": 9, "counter_file": str(transfers)})), say("done")
    )
    await confirming.close()  # the orchestrator that parked the turn is gone

    confirming.completions.confirm(request.call_id, True)
    model = ScriptedModel(
        [call(Call("transfer_money", {"amount": 9, "counter_file": "unused"})), say("done")]
    )
    agent = Agent(name="confirming", tools=TOOLS, model=model)
    async with Orchestrator([agent], settings, models={"confirming": model}) as orch:
        assert await orch.wait_until_settled(session_id, WAIT_S)
        session = await orch.runner("confirming").store.get(session_id)
    assert [r for _, r in answers(session)] == [{"moved": 9, "runs": 1, "confirmed": True}]
    assert transfers.read_text() == "1"
    assert_one_response_per_call(session)
