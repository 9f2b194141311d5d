"""Long-running tools: pending tickets, completions through Redis, resuming by itself."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable

import pytest
import redis
from google.genai import types

from examples import reimbursement
from tests.integration import fleet_tools
from toolfleet.orchestrator.adk.completing import run_message
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli import main as cli
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, ScriptView, call, say
from toolfleet.orchestrator.models.protocol import ModelRequest, function_calls, text_of
from toolfleet.orchestrator.service.orchestrator import Orchestrator
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.completions import Completions, post_result
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import CompletionError
from toolfleet.shared.keys import Keys, SessionKey, session_key

pytestmark = pytest.mark.integration

WAIT_S = 30


def sync_completions(settings: Settings) -> Completions:
    return Completions(
        redis.Redis.from_url(settings.require_redis_url()), Keys(settings.key_prefix)
    )


async def ask(orch: Orchestrator, app: str, message: str) -> tuple[SessionKey, SessionStore]:
    """Run a message on a new session of user u1: its key, and the store holding it."""
    runner = orch.runner(app)
    session_id = uuid.uuid4().hex
    async for _ in runner.run(user_id="u1", session_id=session_id, message=message):
        pass
    return session_key(app, "u1", session_id), runner.store


def calls_named(session: Session, name: str) -> list[types.FunctionCall]:
    return [
        c for e in session.events if e.content for c in function_calls(e.content) if c.name == name
    ]


def responses_for(session: Session, call_id: str) -> list[dict[str, object]]:
    return [
        dict(p.function_response.response or {})
        for e in session.events
        if e.content
        for p in e.content.parts or ()
        if p.function_response and p.function_response.id == call_id
    ]


def final_text(session: Session) -> str:
    return text_of(session.events[-1].content)


async def test_small_reimbursement_completes_in_one_invocation(orchestrator: Orchestrator) -> None:
    key, store = await ask(orchestrator, "reimbursement_agent", "Please reimburse 50$ for meals")
    session = await store.get(key)
    assert len(calls_named(session, "reimburse")) == 1
    assert calls_named(session, "ask_for_approval") == []
    assert final_text(session) == "Done: $50.00 for meals has been reimbursed."
    assert await store.pending_calls(key) == []


async def approve_via_cli(decision: str, call_id: str) -> int:
    # The exact code path of `toolfleet tickets approve|reject ID`, in a thread.
    return await asyncio.to_thread(cli.main, ["tickets", decision, call_id])


@pytest.mark.parametrize(
    ("decision", "status", "answer", "reimbursed"),
    [
        ("approve", "approved", "Approved and paid: $200.00 for meals.", 1),
        ("reject", "rejected", "Your reimbursement was rejected; nothing was paid.", 0),
    ],
)
async def test_large_reimbursement_waits_for_the_approver(
    orchestrator: Orchestrator, decision: str, status: str, answer: str, reimbursed: int
) -> None:
    key, store = await ask(orchestrator, "reimbursement_agent", "Please reimburse 200$ for meals")
    (pending,) = await store.pending_calls(key)
    assert pending.tool == "ask_for_approval" and pending.ticket["status"] == "pending"
    assert pending.args == {"purpose": "meals", "amount": 200.0}
    session = await store.get(key)
    assert "asked Sean Zhou for approval" in final_text(session)
    assert calls_named(session, "reimburse") == []

    assert await approve_via_cli(decision, pending.call_id) == 0
    assert await orchestrator.wait_until_settled(key, WAIT_S)

    session = await store.get(key)
    assert final_text(session) == answer
    assert len(calls_named(session, "reimburse")) == reimbursed
    assert len(calls_named(session, "ask_for_approval")) == 1  # never re-run
    assert responses_for(session, pending.call_id)[-1] == {"status": status}


async def test_ticket_is_completed_in_the_background_without_user_action(
    orchestrator: Orchestrator,
) -> None:
    key, store = await ask(orchestrator, "support_agent", "My login keeps failing")
    (pending,) = await store.pending_calls(key)
    assert await orchestrator.wait_until_settled(key, WAIT_S)
    session = await store.get(key)
    ticket_id = pending.ticket["ticket_id"]
    assert final_text(session).startswith(f"Ticket {ticket_id} is resolved:")
    (final,) = [e for e in session.events if e.author == "completion"]
    assert final.calls[0].worker == "job"  # posted by the background job, not a person


async def test_same_completion_posted_concurrently_reaches_the_model_once(
    orchestrator: Orchestrator, orchestrator_env: dict[str, str]
) -> None:
    key, store = await ask(
        orchestrator, "reimbursement_agent", "Please reimburse 300$ for a laptop"
    )
    (pending,) = await store.pending_calls(key)
    command = [sys.executable, "-m", "toolfleet", "tickets", "approve", pending.call_id]
    posters = [
        subprocess.Popen(
            command, env=orchestrator_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for _ in range(2)
    ]
    outcomes = [p.communicate(timeout=WAIT_S) for p in posters]
    assert await orchestrator.wait_until_settled(key, WAIT_S)
    # Posted again once everything settled: refused with a clear error.
    with pytest.raises(CompletionError, match="already has its final result"):
        sync_completions(orchestrator.settings).post_result(pending.call_id, {"status": "approved"})

    session = await store.get(key)
    finals = [r for r in responses_for(session, pending.call_id) if r["status"] == "approved"]
    assert len(finals) == 1, outcomes
    assert len(calls_named(session, "reimburse")) == 1
    assert final_text(session) == "Approved and paid: $300.00 for expenses."


async def test_unknown_call_id_is_refused_dead_lettered_and_changes_nothing(
    orchestrator: Orchestrator, settings: Settings
) -> None:
    key, store = await ask(orchestrator, "reimbursement_agent", "Please reimburse 500$ for meals")
    before = await store.get(key)
    client = redis.Redis.from_url(settings.require_redis_url())
    dead_before = client.xlen(Keys(settings.key_prefix).dead_letters())

    with pytest.raises(CompletionError, match="no pending call with id 'tf-nope'"):
        sync_completions(settings).post_result("tf-nope", {"status": "approved"})

    entries = client.xrange(Keys(settings.key_prefix).dead_letters())
    assert len(entries) == dead_before + 1
    assert b"tf-nope" in entries[-1][1][b"completion"]
    assert b"no pending call" in entries[-1][1][b"reason"]
    after = await store.get(key)
    assert len(after.events) == len(before.events)
    assert len(await store.pending_calls(key)) == 1
    client.close()


def _answer_case(view: ScriptView) -> str:
    ((_, response),) = view.responses
    return f"{response['case']} is {response['status']}"


async def test_two_long_running_calls_completed_in_reverse_order_are_each_answered_once(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str]
) -> None:
    model = ScriptedModel(
        [
            call(Call("open_case", {"name": "A"}), Call("open_case", {"name": "B"})),
            say("both cases are open"),
            say(_answer_case),
            say(_answer_case),
        ]
    )
    agent = Agent(name="cases_agent", tools=[fleet_tools.open_case_tool], model=model)
    async with Orchestrator([agent], settings) as orch:
        key, store = await ask(orch, "cases_agent", "open two cases")
        case_a, case_b = await store.pending_calls(key)
        completions = sync_completions(settings)
        completions.post_result(case_b.call_id, {"status": "closed", "case": "B"})
        completions.post_result(case_a.call_id, {"status": "closed", "case": "A"})
        assert await orch.wait_until_settled(key, WAIT_S)
        session = await store.get(key)

    for case in (case_a, case_b):
        finals = [r for r in responses_for(session, case.call_id) if r["status"] == "closed"]
        assert len(finals) == 1
    answers = [
        text_of(e.content)
        for e in session.events
        if e.author == "cases_agent" and text_of(e.content)
    ]
    assert answers == ["both cases are open", "B is closed", "A is closed"]
    assert len(model.requests) == 4  # one model call per completion, none repeated


def _wait(predicate: Callable[[], bool], timeout_s: float) -> None:
    from toolfleet.orchestrator.cli.embedded import wait_for

    wait_for(predicate, timeout_s, "the condition")


async def test_pending_call_survives_an_orchestrator_killed_with_sigkill(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str]
) -> None:
    session_id = uuid.uuid4().hex
    first = subprocess.Popen(
        [sys.executable, "-m", "toolfleet", "run", "--agent", "examples.reimbursement:agent",
         "--session", session_id, "Please reimburse 250$ for meals"],
        env=orchestrator_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    key = session_key("reimbursement_agent", "user", session_id)  # `toolfleet run`'s user
    completions = sync_completions(settings)
    pending = lambda: [c for c in completions.pending() if c.session_key == key]  # noqa: E731
    store_client = redis.Redis.from_url(settings.require_redis_url())
    keys = Keys(settings.key_prefix)

    def last_event_has(text: bytes) -> bool:
        last = store_client.lindex(keys.events(key), -1)
        return last is not None and text in last

    # Killed while it waits for the approval (its invocation has ended).
    await asyncio.to_thread(_wait, lambda: last_event_has(b"asked Sean Zhou"), WAIT_S)
    first.send_signal(signal.SIGKILL)
    first.wait(WAIT_S)
    (call_pending,) = pending()

    completions.post_result(call_pending.call_id, {"status": "approved"}, source="test")

    serve = subprocess.Popen(
        [sys.executable, "-m", "toolfleet", "serve",
         "--agent", "examples.reimbursement:agent"],
        env=orchestrator_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        await asyncio.to_thread(_wait, lambda: last_event_has(b"Approved and paid"), WAIT_S)
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(WAIT_S)
    async with Orchestrator([reimbursement.agent], settings) as orch:
        session = await orch.runner("reimbursement_agent").store.get(key)
    assert final_text(session) == "Approved and paid: $250.00 for meals."
    assert len(calls_named(session, "ask_for_approval")) == 1  # not re-dispatched
    assert len(calls_named(session, "reimburse")) == 1
    store_client.close()


async def test_progress_is_recorded_and_shown_then_the_final_result_resumes(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str]
) -> None:
    model = ScriptedModel(
        [call(Call("open_case", {"name": "P"})), say("opened"), say(_answer_case)]
    )
    agent = Agent(name="progress_agent", tools=[fleet_tools.open_case_tool], model=model)
    seen: list[object] = []
    async with Orchestrator([agent], settings, on_update=lambda _, u: seen.append(u)) as orch:
        key, store = await ask(orch, "progress_agent", "open a case")
        (case,) = await store.pending_calls(key)
        post_result(case.call_id, {"done": 0.5}, final=False, settings=settings)

        def has_progress(events: list[object]) -> bool:
            return any(getattr(e, "progress", None) == {"done": 0.5} for e in events)

        while not has_progress(seen):  # the listener's notifications, in order
            orch.listener.handled.clear()
            await asyncio.wait_for(orch.listener.handled.wait(), WAIT_S)
        (still_pending,) = await store.pending_calls(key)
        assert still_pending.progress == [{"done": 0.5}]
        assert len(model.requests) == 2  # progress is not sent to the model by default

        post_result(case.call_id, {"status": "closed", "case": "P"}, settings=settings)
        assert await orch.wait_until_settled(key, WAIT_S)
        session = await store.get(key)
    assert final_text(session) == "P is closed"
    assert [e.progress for e in session.events if e.progress] == [{"done": 0.5}]


async def test_completion_read_by_a_crashed_replica_is_taken_over(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str]
) -> None:
    model = ScriptedModel(
        [call(Call("open_case", {"name": "Z"})), say("opened"), say(_answer_case)]
    )
    agent = Agent(name="takeover_agent", tools=[fleet_tools.open_case_tool], model=model)
    keys = Keys(settings.key_prefix)
    client = redis.Redis.from_url(settings.require_redis_url())
    async with Orchestrator([agent], settings) as first:
        key, _ = await ask(first, "takeover_agent", "open a case")
    (case,) = [c for c in sync_completions(settings).pending() if c.session_key == key]
    post_result(case.call_id, {"status": "closed", "case": "Z"}, settings=settings)
    # A replica reads the entry and dies before acknowledging it.
    stream = keys.completions("takeover_agent")
    taken = client.xreadgroup("orchestrators", "crashed-replica", {stream: ">"}, count=10)
    assert taken and len(taken[0][1]) == 1

    async with Orchestrator([agent], settings, claim_idle_ms=200) as second:
        assert await second.wait_until_settled(key, WAIT_S)
        session = await second.runner("takeover_agent").store.get(key)
    assert final_text(session) == "Z is closed"
    assert client.xpending(stream, "orchestrators")["pending"] == 0
    client.close()


class FixedIdModel:
    """A scripted model that names every call it makes `call_1`, in every session, as an
    OpenAI-compatible model numbers its calls (or a replayed turn repeats them)."""

    def __init__(self, scripted: ScriptedModel) -> None:
        self.scripted = scripted
        self.sent_back: list[str | None] = []  # the ids the model got back, in order

    @property
    def name(self) -> str:
        return "fixed-ids"

    async def generate(self, request: ModelRequest) -> types.Content:
        self.sent_back += [
            p.function_response.id
            for c in request.contents
            for p in c.parts or ()
            if p.function_response is not None
        ]
        turn = await self.scripted.generate(request)
        for made in function_calls(turn):
            made.id = "call_1"
        return turn


async def test_two_users_sessions_whose_model_repeats_a_call_id_keep_their_own_tickets(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str]
) -> None:
    """Given a model that gives the same call id in two users' sessions, each session's
    long-running call has a ticket of its own: completed independently, neither user can
    complete the other's, and the model gets its own id back with each response."""
    model = FixedIdModel(
        ScriptedModel([call(Call("open_case", {"name": "X"})), say("opened"), say(_answer_case)])
    )
    agent = Agent(name="same_ids_agent", tools=[fleet_tools.open_case_tool], model=model)
    async with Orchestrator([agent], settings) as orch:
        runner = orch.runner("same_ids_agent")
        keys = {}
        for user in ("ann", "bob"):
            async for _ in runner.run(user_id=user, session_id="s1", message="open a case"):
                pass
            keys[user] = session_key("same_ids_agent", user, "s1")
        (ann_call,) = await runner.store.pending_calls(keys["ann"])
        (bob_call,) = await runner.store.pending_calls(keys["bob"])
        assert ann_call.call_id != bob_call.call_id
        assert (ann_call.user_id, bob_call.user_id) == ("ann", "bob")

        # Bob answers ann's call with the id he saw in his own session: refused.
        bob_seen = calls_named(await runner.store.get(keys["bob"]), "open_case")[0].id
        assert bob_seen == bob_call.call_id
        answer = types.FunctionResponse(id=ann_call.call_id, name="open_case", response={})
        with pytest.raises(CompletionError, match="no pending call"):
            async for _ in run_message(
                runner,
                keys["bob"],
                types.Content(role="user", parts=[types.Part(function_response=answer)]),
            ):
                pass

        completions = sync_completions(settings)
        completions.post_result(ann_call.call_id, {"status": "closed", "case": "ann's"})
        assert await orch.wait_until_settled(keys["ann"], WAIT_S)
        (still,) = await runner.store.pending_calls(keys["bob"])
        assert still.call_id == bob_call.call_id and still.user_id == "bob"
        completions.post_result(bob_call.call_id, {"status": "closed", "case": "bob's"})
        assert await orch.wait_until_settled(keys["bob"], WAIT_S)
        ann = await runner.store.get(keys["ann"])
        bob = await runner.store.get(keys["bob"])
        assert final_text(ann) == "ann's is closed"
        assert final_text(bob) == "bob's is closed"
        # Each session holds its own call and its own result, nothing of the other's.
        assert responses_for(ann, bob_call.call_id) == []
        assert responses_for(bob, ann_call.call_id) == []
        assert responses_for(bob, bob_call.call_id)[-1] == {"status": "closed", "case": "bob's"}
    # The model's own id went back with each response it was given.
    assert model.sent_back and set(model.sent_back) == {"call_1"}
