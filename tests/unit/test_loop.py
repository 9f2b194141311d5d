"""The agent loop with the offline model, an in-process runner and a fakeredis store."""

from __future__ import annotations

import re
from typing import Any

import fakeredis
import pytest
from google.genai import types

from tests.support import InProcessRunner
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.loop.invocation import (
    CallFinished,
    CallsDispatched,
    EndReason,
    Invocation,
    InvocationEnded,
    Update,
)
from toolfleet.orchestrator.loop.planning import PLAN_CHUNK
from toolfleet.orchestrator.loop.run import run_invocation
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, Step, call, say
from toolfleet.orchestrator.models.protocol import (
    ModelRequest,
    function_calls,
    loop_call_id,
    model_call_id,
    text_of,
)
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.batch import WriteBatch
from toolfleet.shared.config import Settings
from toolfleet.shared.context import ToolContext
from toolfleet.shared.errors import ModelError
from toolfleet.shared.keys import Keys, SessionKey, session_key

S1 = session_key("app", "u1", "s1")  # the session `run` uses


def slow_writer(value: str, tool_context: ToolContext) -> str:
    """Writes (its result arrives last: the runner yields in reverse)."""
    tool_context.state["color"] = value
    tool_context.state["slow"] = True
    return value


def fast_writer(value: str, tool_context: ToolContext) -> str:
    """Writes (its result arrives first)."""
    tool_context.state["color"] = value
    return value


def add(a: int, b: int) -> int:
    """Adds.

    Args:
        a: First.
        b: Second.
    """
    return a + b


def explode() -> None:
    """Always fails."""
    raise RuntimeError("boom")


def scratch(tool_context: ToolContext) -> str:
    """Writes temp state."""
    tool_context.state["temp:note"] = "scratch"
    return "ok"


def make_agent(*steps: Any) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(list(steps))
    agent = Agent(
        name="tester",
        instruction="test",
        tools=[slow_writer, fast_writer, add, explode, scratch],
        model=model,
    )
    return agent, model


async def run(
    store: SessionStore, agent: Agent, message: str, reverse: bool = False, **settings: Any
) -> tuple[list[Update], InProcessRunner, SessionKey]:
    session = await store.get_or_create("app", "u1", "s1")
    runner = InProcessRunner(reverse=reverse)
    assert agent.model is not None
    model = agent.model
    inv = Invocation(
        agent, lambda _: model, session, store, runner, Settings(**settings), Keys("t")
    )
    content = types.Content(role="user", parts=[types.Part(text=message)])
    updates = [u async for u in run_invocation(inv, content)]
    return updates, runner, session.key


def response_event(updates: list[Update], turn: int = 0) -> Event:
    """The n-th event holding function responses."""
    return [u for u in updates if isinstance(u, Event) and u.calls][turn]


def responses(updates: list[Update], turn: int = 0) -> list[types.FunctionResponse]:
    content = response_event(updates, turn).content
    assert content is not None
    return [p.function_response for p in content.parts or () if p.function_response]


async def test_parallel_results_reach_the_model_in_call_order_and_deltas_merge_in_call_order(
    store: SessionStore,
) -> None:
    agent, model = make_agent(
        call(Call("slow_writer", {"value": "red"}), Call("fast_writer", {"value": "blue"})),
        say("done"),
    )
    updates, runner, session_id = await run(store, agent, "go", reverse=True)

    finished = [u.result.tool for u in updates if isinstance(u, CallFinished)]
    assert finished == ["fast_writer", "slow_writer"]  # arrival order
    assert [r.name for r in responses(updates)] == ["slow_writer", "fast_writer"]
    # Call order, not arrival order: the later call's write wins.
    assert response_event(updates).state_delta == {"color": "blue", "slow": True}
    stored = await store.get(session_id)
    assert stored.state == {"color": "blue", "slow": True}
    assert runner.batches == [[c.id for c in function_calls(updates[1].content)]]  # type: ignore[union-attr]
    assert text_of(stored.events[-1].content) == "done"
    # The model saw both responses in its second request.
    assert len(model.requests) == 2


async def test_unknown_tool_gets_an_error_listing_tools_and_is_not_dispatched(
    store: SessionStore,
) -> None:
    agent, _ = make_agent(call(Call("nope"), Call("add", {"a": 1, "b": 2})), say("ok"))
    updates, runner, _ = await run(store, agent, "go")
    unknown, added = responses(updates)
    assert unknown.response is not None and unknown.response["error_type"] == "UnknownTool"
    assert "add, explode, fast_writer, scratch, slow_writer" in unknown.response["error_message"]
    assert added.response == {"result": 3}
    assert len(runner.batches) == 1 and len(runner.batches[0]) == 1


async def test_a_model_may_not_pass_a_sealed_value_to_a_tool(store: SessionStore) -> None:
    """Only the orchestrator seals: a sealed token the model passes (a stolen one, say, that a
    worker would otherwise open) is refused before dispatch."""
    agent, _ = make_agent(call(Call("add", {"a": {"$sealed": "gAAAA-stolen"}, "b": 1})), say("ok"))
    updates, runner, _ = await run(store, agent, "go")
    (refused,) = responses(updates)
    assert refused.response is not None and refused.response["error_type"] == "InvalidArguments"
    assert "'$sealed' is reserved" in refused.response["error_message"]
    assert runner.batches == []


async def test_bad_arguments_name_each_problem_and_are_not_dispatched(store: SessionStore) -> None:
    agent, _ = make_agent(call(Call("add", {"a": "one", "c": 3})), say("ok"))
    updates, runner, _ = await run(store, agent, "go")
    (bad,) = responses(updates)
    assert bad.response is not None
    message = bad.response["error_message"]
    assert bad.response["error_type"] == "InvalidArguments"
    assert "a: Input should be a valid integer" in message
    assert "b: required argument is missing" in message
    assert "c: unknown argument" in message
    assert runner.batches == []


async def test_tool_exception_reaches_the_model_as_error_while_others_succeed(
    store: SessionStore,
) -> None:
    agent, _ = make_agent(call(Call("explode"), Call("add", {"a": 2, "b": 2})), say("ok"))
    updates, _, _ = await run(store, agent, "go")
    failed, ok = responses(updates)
    assert failed.response == {
        "status": "error",
        "error_type": "RuntimeError",
        "error_message": "boom",
    }
    assert ok.response == {"result": 4}


async def test_calls_without_id_get_one_and_responses_carry_it(store: SessionStore) -> None:
    agent, _ = make_agent(
        call(Call("add", {"a": 1, "b": 1}), Call("add", {"a": 2, "b": 2})), say("ok")
    )
    updates, _, _ = await run(store, agent, "go")
    model_event = updates[1]
    assert isinstance(model_event, Event) and model_event.content is not None
    ids = [c.id for c in function_calls(model_event.content)]
    assert all(i and i.startswith("tf-") for i in ids) and len(set(ids)) == 2
    assert [r.id for r in responses(updates)] == ids


async def test_temp_state_is_not_persisted(store: SessionStore) -> None:
    agent, _ = make_agent(call(Call("scratch")), say("ok"))
    updates, _, session_id = await run(store, agent, "go")
    assert response_event(updates).state_delta == {"temp:note": "scratch"}
    stored = await store.get(session_id)
    assert "temp:note" not in stored.state
    assert all("temp:note" not in e.state_delta for e in stored.events)


async def test_max_steps_ends_the_invocation_with_a_clear_event(store: SessionStore) -> None:
    loop_forever = Step(calls=[Call("add", {"a": 1, "b": 1})])
    agent, _ = make_agent(*([loop_forever] * 5))
    updates, _, _ = await run(store, agent, "go", max_steps=2)
    stopped, ended = updates[-2:]
    assert isinstance(stopped, Event) and stopped.error is not None
    assert "max_steps=2" in stopped.error and "TOOLFLEET_MAX_STEPS" in stopped.error
    assert ended == InvocationEnded(stopped.invocation_id, EndReason.MAX_STEPS, stopped.error)


def give_up(tool_context: ToolContext) -> str:
    """Hands the turn back (escalate)."""
    tool_context.actions.escalate = True
    return "over to you"


def verbatim(tool_context: ToolContext) -> str:
    """Answers the user itself (skip_summarization)."""
    tool_context.actions.skip_summarization = True
    return "as is"


@pytest.mark.parametrize(
    ("steps", "reason"),
    [
        ([say("hello")], EndReason.ANSWERED),
        ([call(Call("verbatim", {}))], EndReason.SKIPPED_SUMMARY),
        ([call(Call("give_up", {}))], EndReason.ESCALATED),
    ],
)
async def test_every_invocation_ends_with_one_update_saying_why(
    store: SessionStore, steps: list[Step], reason: EndReason
) -> None:
    """Given a model whose turn ends the invocation, when it runs, then the last update
    (and only that one) says the invocation ended, and why."""
    agent = Agent(name="ender", tools=[verbatim, give_up], model=ScriptedModel(steps))
    updates, _, _ = await run(store, agent, "go")
    ended = [u for u in updates if isinstance(u, InvocationEnded)]
    assert ended == [updates[-1]] and ended[0].reason is reason and ended[0].error is None


async def test_exhausted_script_is_a_model_error(store: SessionStore) -> None:
    agent, _ = make_agent(call(Call("add", {"a": 1, "b": 1})))
    with pytest.raises(ModelError, match="has 1 steps and step 2 was asked for"):
        await run(store, agent, "go")


async def test_oversized_arguments_are_refused_before_dispatch(store: SessionStore) -> None:
    agent, _ = make_agent(call(Call("add", {"a": 1, "b": 2, "pad": "x" * 5000})), say("ok"))
    updates, runner, _ = await run(store, agent, "go", max_payload_bytes=1024)
    (big,) = responses(updates)
    assert big.response is not None and big.response["error_type"] == "InvalidArguments"
    assert "over the 1024-byte limit" in big.response["error_message"]
    assert runner.batches == []


async def test_a_turn_whose_invocation_died_is_finished_without_asking_the_model_again(
    store: SessionStore,
) -> None:
    agent, model = make_agent(call(Call("add", {"a": 1, "b": 2})), say("3"))
    session = await store.get_or_create("app", "u1", "s1")
    user = types.Content(role="user", parts=[types.Part(text="add")])
    await store.append(
        session, Event(invocation_id="inv-1", author="user", content=user), owes_turn=True
    )
    turn = types.Content(
        role="model",
        parts=[
            types.Part(function_call=types.FunctionCall(id="c1", name="add", args={"a": 1, "b": 2}))
        ],
    )
    await store.append(session, Event(invocation_id="inv-1", author="tester", content=turn))
    assert await store.sessions_to_resume() == [S1]  # the replica "died" here

    runner = InProcessRunner()
    inv = Invocation(agent, lambda _: model, session, store, runner, Settings(), Keys("t"))
    updates = [u async for u in run_invocation(inv, None)]

    assert runner.batches == [["c1"]]  # the open turn's call, with its id
    assert [r.response for r in responses(updates)] == [{"result": 3}]
    assert len(model.requests) == 1  # only for the answer after the responses
    stored = await store.get(S1)
    assert [text_of(e.content) for e in stored.events if e.content][-1] == "3"


class FailingOnce(InProcessRunner):
    """The first turn's calls fail: with `sent`, after the send that stores the model turn
    (the connection broke while the results were awaited); else before anything is sent."""

    def __init__(self, client: Any, *, sent: bool) -> None:
        super().__init__()
        self.client = client
        self.sent = sent
        self.failed = False

    async def run(  # type: ignore[override]
        self,
        calls: Any,
        *,
        resume: bool = False,
        fence: object = None,
        with_first_send: Any = None,
        more: Any = None,
    ) -> Any:
        if not self.failed:
            self.failed = True
            if self.sent and with_first_send is not None:
                batch = WriteBatch()  # the send: the model turn goes with it, as on the fleet
                written = with_first_send(batch)
                await written(await batch.run(self.client))
            raise ConnectionError("the broker is away")
        async for result in super().run(calls, resume=resume, fence=fence, more=more):
            yield result


async def test_a_turn_whose_calls_were_never_sent_is_not_stored(store: SessionStore) -> None:
    """The model turn is stored in the step that sends its calls: if sending fails, the
    session holds no call that was never sent, and the next message starts afresh."""
    model = ScriptedModel([call(Call("add", {"a": 1, "b": 2})), say("ok"), say("ok")])
    agent = Agent(name="tester", tools=[add], model=model)
    runner = FailingOnce(store._redis, sent=False)
    session = await store.get_or_create("app", "u1", "s1")
    inv = Invocation(agent, lambda _: model, session, store, runner, Settings(), Keys("t"))
    hello = types.Content(role="user", parts=[types.Part(text="first")])
    with pytest.raises(ConnectionError):
        _ = [u async for u in run_invocation(inv, hello)]
    stored = await store.get(S1)
    assert stored.open_turn() is None
    assert [e.author for e in stored.events] == ["user"]  # the message, and no model turn


async def test_a_message_after_a_failed_turn_first_answers_that_turns_calls(
    store: SessionStore,
) -> None:
    """Given an invocation that failed after storing a model turn with calls, when the
    next message arrives, then those calls are answered first: the model never sees a
    call without its response."""
    model = ScriptedModel(
        [call(Call("add", {"a": 1, "b": 2}), Call("add", {"a": 3, "b": 4})), say("ok")]
    )
    agent = Agent(name="tester", tools=[add], model=model)
    runner = FailingOnce(store._redis, sent=True)
    session = await store.get_or_create("app", "u1", "s1")

    def invocation() -> Invocation:
        return Invocation(agent, lambda _: model, session, store, runner, Settings(), Keys("t"))

    hello = types.Content(role="user", parts=[types.Part(text="first")])
    with pytest.raises(ConnectionError):
        _ = [u async for u in run_invocation(invocation(), hello)]
    assert (await store.get(S1)).open_turn() is not None

    again = types.Content(role="user", parts=[types.Part(text="second")])
    updates = [u async for u in run_invocation(invocation(), again)]
    stored = (await store.get(S1)).events
    kinds = [
        "calls" if e.content and function_calls(e.content) else
        "text" if e.content and e.content.parts and e.content.parts[0].text else "responses"
        for e in stored
    ]  # fmt: skip
    assert kinds[:4] == ["text", "calls", "responses", "text"]  # answered, then "second"
    assert [r.response for r in responses(updates)] == [{"result": 3}, {"result": 7}]
    # The model's first request after the failure saw both calls answered.
    after_failure = model.requests[1]
    answered = [
        p.function_response.id
        for content in after_failure.contents
        for p in content.parts or ()
        if p.function_response
    ]
    assert answered == [c.id for c in function_calls(stored[1].content)]  # type: ignore[arg-type]
    assert (await store.get(S1)).open_turn() is None


class SameIdsModel(ScriptedModel):
    """Names its calls as a model that numbers them per turn does: `call_1`, `call_2`."""

    async def generate(self, request: ModelRequest) -> types.Content:
        turn = await super().generate(request)
        for n, made in enumerate(function_calls(turn), 1):
            made.id = f"call_{n}"
        return turn


async def test_calls_of_two_users_given_one_id_by_the_model_get_ids_of_their_own(
    store: SessionStore,
) -> None:
    """Given a model that names its calls alike in every session, each call is keyed
    by an id of the loop's, unique across sessions and users, and the model gets its own
    ids back with its calls and their responses."""
    model = SameIdsModel(
        [call(Call("add", {"a": 1, "b": 2}), Call("add", {"a": 3, "b": 4})), say("ok")]
    )
    agent = Agent(name="tester", tools=[add], model=model)
    sent: list[list[str]] = []
    stored_ids: list[str] = []
    for user in ("ann", "bob"):
        session = await store.get_or_create("app", user, "s1")
        runner = InProcessRunner()
        inv = Invocation(agent, lambda _: model, session, store, runner, Settings(), Keys("t"))
        hello = types.Content(role="user", parts=[types.Part(text="add")])
        updates = [u async for u in run_invocation(inv, hello)]
        assert [r.response for r in responses(updates)] == [{"result": 3}, {"result": 7}]
        sent += runner.batches
        stored = await store.get(session.key)
        stored_ids += [c.id or "" for c in function_calls(stored.events[1].content)]  # type: ignore[arg-type]
    assert len(set(stored_ids)) == 4 and all(i.startswith("tf-") for i in stored_ids)
    assert [i for batch in sent for i in batch] == stored_ids
    for request in (model.requests[1], model.requests[3]):  # each session's answer turn
        turn, answered = request.contents[-2:]
        assert [c.id for c in function_calls(turn)] == ["call_1", "call_2"]
        assert [p.function_response.id for p in answered.parts or () if p.function_response] == [
            "call_1",
            "call_2",
        ]


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("call_1", "call_1"),
        ("toolu_01A.b@c+d-e", "toolu_01A.b@c+d-e"),
        ("tf-0123456789abcdef", "tf-0123456789abcdef"),  # a replayed id of ours: the model's
        (None, None),
        ("", None),
        ("a/b", None),  # not kept: no ticket URL could name it
        ("x" * 93, None),
    ],
)
def test_the_loop_id_of_a_call_gives_back_the_model_id_it_keeps(
    given: str | None, kept: str | None
) -> None:
    made = loop_call_id(given)
    assert made.startswith("tf-") and made != loop_call_id(given)
    assert len(made) <= 128 and re.fullmatch(r"[A-Za-z0-9._@+-]+", made)
    assert model_call_id(made) == kept


def test_ids_stored_before_the_loop_made_every_id_are_read_as_they_were() -> None:
    assert model_call_id("call_1") == "call_1"  # the model's, kept as it gave it
    assert model_call_id("tf-0123456789abcdef") is None  # the loop's own, never the model's
    assert model_call_id("tf-" + "z" * 32) is None  # the length of the loop's, not its digits


async def test_a_turn_wider_than_a_chunk_is_told_once_and_answered_in_call_order(
    store: SessionStore,
) -> None:
    """A wide turn is checked in chunks, its first calls sent while the next are checked;
    what the turn did with each call is told once, every call checked: the loop's own
    answers first, then one CallsDispatched with every call sent, then the results."""
    wide = 2 * PLAN_CHUNK + 7
    unknown = {5, PLAN_CHUNK + 3, 2 * PLAN_CHUNK + 6}  # one in each chunk
    calls = [Call("nope" if i in unknown else "add", {"a": i, "b": 1}) for i in range(wide)]
    agent, _ = make_agent(call(*calls), say("done"))
    updates, runner, _ = await run(store, agent, "go", reverse=True)

    kinds = [type(u).__name__ for u in updates if isinstance(u, CallFinished | CallsDispatched)]
    assert kinds == ["CallFinished"] * 3 + ["CallsDispatched"] + ["CallFinished"] * (wide - 3)
    told = [u for u in updates if isinstance(u, CallsDispatched)]
    assert len(told[0].calls) == wide - 3
    assert runner.batches == [[c.call_id for c in told[0].calls]]
    answered = responses(updates)
    assert len(answered) == wide
    for i, part in enumerate(answered):
        assert part.response is not None
        if i in unknown:
            assert part.response["error_type"] == "UnknownTool"
        else:
            assert part.response == {"result": i + 1}


class AnswersBeforeAskingForMore(InProcessRunner):
    """Runs the first chunk's first call and yields its result before it asks for the
    turn's other calls (as the fleet yields a no-worker answer while a turn is checked)."""

    async def run(self, calls: Any, *, more: Any = None, **options: Any) -> Any:
        first, *others = calls
        async for result in super().run([first]):
            yield result
        async for result in super().run(others, more=more):
            yield result


async def test_a_result_that_comes_before_the_turn_is_checked_is_told_after_it(
    store: SessionStore,
) -> None:
    wide = PLAN_CHUNK + 2
    agent, _ = make_agent(call(*[Call("add", {"a": i, "b": 1}) for i in range(wide)]), say("ok"))
    session = await store.get_or_create("app", "u1", "s1")
    runner = AnswersBeforeAskingForMore()
    model = agent.model
    assert model is not None
    inv = Invocation(agent, lambda _: model, session, store, runner, Settings(), Keys("t"))
    go = types.Content(role="user", parts=[types.Part(text="go")])
    updates = [u async for u in run_invocation(inv, go)]

    kinds = [type(u).__name__ for u in updates if isinstance(u, CallFinished | CallsDispatched)]
    assert kinds == ["CallsDispatched"] + ["CallFinished"] * wide
    assert [p.response for p in responses(updates)] == [{"result": i + 1} for i in range(wide)]


def unlock(api_key: int) -> str:
    """Unlocks with a numeric key."""
    return "open"


async def test_a_bad_secret_argument_is_refused_without_quoting_its_value(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    """A problem quotes the value it found: the model's response, and the stored events
    that keep it, get a secret argument's masked."""
    store = SessionStore(fake_redis, Keys("t"), ["api_key"])
    model = ScriptedModel([call(Call("unlock", {"api_key": "sk-live-4242"})), say("ok")])
    agent = Agent(name="tester", instruction="test", tools=[unlock], model=model)
    updates, runner, key = await run(store, agent, "go")
    (bad,) = responses(updates)
    assert bad.response is not None and bad.response["error_type"] == "InvalidArguments"
    message = bad.response["error_message"]
    assert "api_key: Input should be a valid integer" in message and "(got '***')" in message
    stored = await fake_redis.lrange(Keys("t").events(key), 0, -1)
    assert stored and all(b"sk-live-4242" not in event for event in stored)
    assert runner.batches == []
