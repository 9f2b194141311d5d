"""Bad input on a real redis-server and real workers: refused clearly, nothing lost.

Invalid calls never reach the broker; junk pushed into the broker (unregistered task,
pickle, malformed JSON) is refused by the workers, which keep serving; forged entries
on a session's results stream are rejected; completions that match no pending call are
refused and dead-lettered - and the session they aimed at is unharmed.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import pickle
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import redis
from google.genai import types

from tests.faults import input_tools
from tests.faults.conftest import fault_settings
from tests.faults.probe import executions
from tests.faults.servers import RedisServer
from tests.support import until as waiting
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.local_workers import WorkerGroup, WorkerProcess
from toolfleet.orchestrator.fleet.dispatch import CeleryPublisher
from toolfleet.orchestrator.loop.invocation import CallsDispatched, Update
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.orchestrator.service.orchestrator import Orchestrator
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.shared.call_signing import CallSigner, call_kwargs
from toolfleet.shared.completions import Completions
from toolfleet.shared.config import Settings
from toolfleet.shared.discovery import tools_in_module
from toolfleet.shared.errors import CompletionError
from toolfleet.shared.keys import Keys, queue_name, session_key
from toolfleet.shared.messages import (
    COMPLETION_FIELD,
    RESULT_FIELD,
    CallStatus,
    ToolCall,
    ToolResult,
)
from toolfleet.shared.signing import SIGNATURE_FIELD, ResultSigner

PAYLOAD_LIMIT = 4096
WAIT_S = 20.0
TOOLS = tools_in_module(input_tools)
QUEUE = queue_name("default")


@pytest.fixture(scope="module")
def input_settings(redis_server: RedisServer) -> Settings:
    return fault_settings(redis_server.url(), max_payload_bytes=PAYLOAD_LIMIT)


@pytest.fixture(scope="module")
def fleet(input_settings: Settings) -> Iterator[WorkerGroup]:
    env = {"TOOLFLEET_MAX_PAYLOAD_BYTES": str(PAYLOAD_LIMIT)}
    with WorkerGroup(input_settings, extra_env=env) as group:
        group.start(["default"], concurrency=2, name="bad-input")
        yield group


@pytest.fixture(scope="module")
def client(input_settings: Settings) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(input_settings.require_redis_url())
    yield c
    c.close()


def worker_of(fleet: WorkerGroup) -> WorkerProcess:
    (worker,) = fleet.workers
    return worker


def agent_with(*steps: object, name: str = "input_agent") -> Agent:
    return Agent(name=name, tools=TOOLS, model=ScriptedModel(list(steps)))  # type: ignore[arg-type]


async def run_turn(settings: Settings, *steps: object) -> list[Update]:
    async with Runner(agent_with(*steps), settings) as runner:
        return [
            u async for u in runner.run(user_id="u1", session_id=uuid.uuid4().hex, message="go")
        ]


def responses(updates: list[Update]) -> list[types.FunctionResponse]:
    (event,) = [u for u in updates if isinstance(u, Event) and u.calls][:1]
    assert event.content is not None
    return [p.function_response for p in event.content.parts or () if p.function_response]


async def until(predicate: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
    """`tests.support.until` with this module's timeout."""
    await waiting(predicate, what, timeout_s)


async def test_invalid_calls_get_error_responses_and_nothing_is_dispatched(
    input_settings: Settings,
    fleet: WorkerGroup,
    client: redis.Redis,
    report_figure: Callable[[str, object], None],
) -> None:
    oversized = "y" * (PAYLOAD_LIMIT + 10)
    updates = await run_turn(
        input_settings,
        call(
            Call("no_such_tool", {"x": 1}),
            Call("typed_echo", {"text": "a"}),
            Call("typed_echo", {"text": "a", "count": "many"}),
            Call("typed_echo", {"text": oversized, "count": 1}),
            Call("typed_echo", {"text": "ok", "count": 2}),
        ),
        say("done"),
    )
    unknown, missing, wrong_type, too_big, valid = responses(updates)
    refused = [unknown, missing, wrong_type, too_big]
    assert [(r.response or {})["error_type"] for r in refused] == [
        "UnknownTool", "InvalidArguments", "InvalidArguments", "InvalidArguments",
    ]  # fmt: skip
    assert "no tool named 'no_such_tool'" in unknown.response["error_message"]  # type: ignore[index]
    assert "count" in missing.response["error_message"]  # type: ignore[index]
    assert "count" in wrong_type.response["error_message"]  # type: ignore[index]
    assert f"over the {PAYLOAD_LIMIT}-byte limit" in too_big.response["error_message"]  # type: ignore[index]
    assert valid.response == {"echo": ["ok", "ok"]}
    dispatched = [c.call_id for u in updates if isinstance(u, CallsDispatched) for c in u.calls]
    assert dispatched == [valid.id]  # only the valid call left for the broker
    prefix = input_settings.key_prefix
    assert [executions(client, prefix, r.id or "") for r in refused] == [0, 0, 0, 0]
    assert executions(client, prefix, valid.id or "") == 1
    assert client.llen(QUEUE) == 0
    report_figure("invalid calls dispatched / executed", f"{len(dispatched) - 1} / 0 of 4")


async def test_result_over_the_size_limit_is_replaced_by_an_error(
    input_settings: Settings,
    fleet: WorkerGroup,
    client: redis.Redis,
    report_figure: Callable[[str, object], None],
) -> None:
    updates = await run_turn(
        input_settings, call(Call("big_result", {"size": PAYLOAD_LIMIT * 2})), say("done")
    )
    (big,) = responses(updates)
    assert big.response is not None and big.response["error_type"] == "ResultRejected"
    assert f"over the {PAYLOAD_LIMIT}-byte limit" in big.response["error_message"]
    assert "blob" not in big.response  # replaced, not truncated
    assert executions(client, input_settings.key_prefix, big.id or "") == 1  # not retried
    assert "unsendable result" in worker_of(fleet).log()
    report_figure("result over the limit", "replaced by a ResultRejected error (not truncated)")


class _Canary:
    """Unpickling this creates the canary file: what a pickle payload could do."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.path, "w"))


def _envelope(settings: Settings, tool: str) -> ToolCall:
    session = uuid.uuid4().hex
    return ToolCall(
        call_id=f"junk-{uuid.uuid4().hex[:8]}", tool=tool, args={"text": "t", "count": 1},
        session_id=session, app_name="input_agent", user_id="u1", invocation_id="inv-junk",
        agent="input_agent",
        reply_to=Keys(settings.key_prefix).results(session_key("input_agent", "u1", session)),
        dispatched_at=time.time(),
    )  # fmt: skip


def _with_body(message: str, body: bytes, content_type: str, encoding: str = "utf-8") -> str:
    wrapped = json.loads(message)
    wrapped["body"] = base64.b64encode(body).decode()
    wrapped["content-type"] = content_type
    wrapped["content-encoding"] = encoding
    return json.dumps(wrapped)


async def test_junk_in_the_broker_queue_is_refused_and_the_worker_keeps_serving(
    input_settings: Settings,
    fleet: WorkerGroup,
    client: redis.Redis,
    tmp_path: Path,
    report_figure: Callable[[str, object], None],
) -> None:
    signer = CallSigner.of(input_settings.fleet_key)
    publisher = CeleryPublisher(None, input_settings.secret_arg_names, signer=signer)  # type: ignore[arg-type]
    canary = tmp_path / "canary"

    def message(tool: str) -> tuple[ToolCall, str]:
        envelope = _envelope(input_settings, tool)
        return envelope, publisher.encode(publisher.dispatch(envelope, QUEUE))

    unregistered, unregistered_msg = message("not_registered")
    pickled, pickled_msg = message("typed_echo")
    malformed, malformed_msg = message("typed_echo")
    bad_envelope, bad_envelope_msg = message("typed_echo")
    unsigned, unsigned_msg = message("typed_echo")
    junk = [
        unregistered_msg,
        # A registered task, but a pickle body whose unpickling creates the canary.
        _with_body(
            pickled_msg, pickle.dumps(_Canary(canary)), "application/x-python-serialize", "binary"
        ),
        _with_body(malformed_msg, b'[[], {"call": {not json', "application/json"),
        _with_body(  # signed, but no call envelope
            bad_envelope_msg,
            json.dumps([[], call_kwargs(b'{"tool": "x"}', signer), {}]).encode(),
            "application/json",
        ),
        # A valid call without the fleet's signature: not the orchestrator's.
        _with_body(
            unsigned_msg,
            json.dumps([[], {"call": unsigned.model_dump_json()}, {}]).encode(),
            "application/json",
        ),
    ]
    worker = worker_of(fleet)
    client.lpush(QUEUE, *junk)
    markers = [
        "ERROR/MainProcess] Received unregistered task of type 'tool.not_registered'",
        "ERROR/MainProcess] Received invalid task message: Refusing to deserialize untrusted "
        "content of type pickle",
        "CRITICAL/MainProcess] Can't decode message body: DecodeError(JSONDecodeError(",
        "] rejected a malformed call envelope for typed_echo",
        "] refused a message of task tool.typed_echo",
    ]

    def all_refused() -> bool:
        log = worker.log()
        answered = client.xlen(unregistered.reply_to) == 1
        return client.llen(QUEUE) == 0 and all(m in log for m in markers) and answered

    await until(all_refused, "the worker to refuse the five junk messages")
    assert not canary.exists(), "the pickle payload was unpickled"
    prefix = input_settings.key_prefix
    for envelope in (unregistered, pickled, malformed, bad_envelope, unsigned):
        assert executions(client, prefix, envelope.call_id) == 0
    for envelope in (pickled, malformed, bad_envelope, unsigned):
        assert client.xlen(envelope.reply_to) == 0  # nothing answered a junk message
    # A valid call of a tool the worker lacks is answered, saying what to change.
    (entry,) = cast(list[tuple[bytes, dict[bytes, bytes]]], client.xrange(unregistered.reply_to))
    answer = ToolResult.model_validate_json(entry[1][RESULT_FIELD.encode()])
    assert answer.call_id == unregistered.call_id
    assert answer.response["error_type"] == "ToolNotRegisteredError"
    assert "TOOLFLEET_TOOL_MODULES" in answer.response["error_message"]
    assert worker.alive()
    updates = await run_turn(
        input_settings, call(Call("typed_echo", {"text": "still", "count": 1})), say("ok")
    )
    assert responses(updates)[0].response == {"echo": ["still"]}
    report_figure("junk broker messages refused, worker alive", f"5 of 5, {worker.alive()}")


async def test_forged_results_on_the_stream_are_rejected_and_the_real_one_reaches_the_model(
    input_settings: Settings,
    fleet: WorkerGroup,
    client: redis.Redis,
    caplog: pytest.LogCaptureFixture,
    report_figure: Callable[[str, object], None],
) -> None:
    caplog.set_level(logging.INFO, logger="toolfleet.orchestrator.fleet.results")
    gate = uuid.uuid4().hex
    agent = agent_with(call(Call("gated", {"name": gate})), say("done"))
    dispatched: asyncio.Future[list[ToolCall]] = asyncio.get_running_loop().create_future()

    async def drive(runner: Runner) -> AsyncIterator[Update]:
        async for u in runner.run(user_id="u1", session_id=uuid.uuid4().hex, message="go"):
            if isinstance(u, CallsDispatched) and not dispatched.done():
                dispatched.set_result(u.calls)
            yield u

    async with Runner(agent, input_settings) as runner:
        turn = asyncio.create_task(_collect(drive(runner)))
        (awaited,) = await asyncio.wait_for(dispatched, WAIT_S)
        prefix = input_settings.key_prefix
        await until(lambda: executions(client, prefix, awaited.call_id) == 1, "the tool to start")
        real = {"gate": gate, "opened": True}
        forged = ToolResult(
            call_id=awaited.call_id, tool=awaited.tool, session_id=awaited.session_id,
            invocation_id=awaited.invocation_id, status=CallStatus.SUCCESS,
            response={"gate": gate, "opened": "forged"},
        )  # fmt: skip
        other_session = forged.model_copy(update={"session_id": "someone-else"})
        other_tool = forged.model_copy(update={"tool": "typed_echo"})
        stream = awaited.reply_to
        # Unsigned: a client that may write the stream but has no fleet key.
        client.xadd(stream, {RESULT_FIELD: forged.model_dump_json()})
        # Signed with the fleet key (a worker's, misbehaving): still checked one by one.
        signer = ResultSigner(input_settings.fleet_key or "")
        for payload in (
            '{"call_id": "' + awaited.call_id + '", "oops',
            other_session.model_dump_json(),
            other_tool.model_dump_json(),
        ):
            client.xadd(
                stream, {RESULT_FIELD: payload, SIGNATURE_FIELD: signer.sign(payload.encode())}
            )
        await until(lambda: caplog.text.count("rejected") >= 4, "the forged entries to be read")
        client.rpush(input_tools.gate_key(prefix, gate), 1)
        updates = await asyncio.wait_for(turn, WAIT_S)
    (response,) = responses(updates)
    assert response.response == real
    assert caplog.text.count("no valid fleet-key signature") == 1
    assert caplog.text.count("rejected a malformed entry") == 1
    assert "session 'someone-else', tool 'gated'" in caplog.text
    assert f"session {awaited.session_id!r}, tool 'typed_echo'" in caplog.text
    assert not any("forged" in str(u) for u in updates)
    report_figure(
        "forged result entries rejected",
        "4 of 4 (unsigned; signed but malformed, other session, other tool)",
    )


async def _collect(updates: AsyncIterator[Update]) -> list[Update]:
    return [u async for u in updates]


async def test_completions_for_unknown_or_finished_calls_are_refused_and_dead_lettered(
    input_settings: Settings,
    fleet: WorkerGroup,
    client: redis.Redis,
    report_figure: Callable[[str, object], None],
) -> None:
    agent = agent_with(
        call(Call("open_ticket", {"subject": "printer"})),
        say("opened"),
        say(lambda view: f"ticket {view.response('open_ticket')['status']}"),
        name="ticket_agent",
    )
    keys = Keys(input_settings.key_prefix)
    completions = Completions(client, keys)
    session_id = uuid.uuid4().hex
    dead = keys.dead_letters()
    async with Orchestrator([agent], input_settings) as orch:
        runner = orch.runner("ticket_agent")
        async for _ in runner.run(user_id="u1", session_id=session_id, message="open one"):
            pass
        key = session_key("ticket_agent", "u1", session_id)
        (pending,) = await runner.store.pending_calls(key)
        before = len((await runner.store.get(key)).events)
        dead_before = client.xlen(dead)

        with pytest.raises(CompletionError, match="no pending call with id 'tf-nope'"):
            completions.post_result("tf-nope", {"status": "done"})
        # Straight onto the stream, past the poster's check: the orchestrator refuses too.
        ghost = {
            "call_id": "tf-ghost", "session_key": session_key("ticket_agent", "u1", "nope"),
            "response": {"status": "done"},
            "final": True, "posted_at": time.time(),
        }  # fmt: skip
        stream = keys.completions("ticket_agent")
        client.xadd(stream, {COMPLETION_FIELD: json.dumps(ghost)})
        client.xadd(stream, {COMPLETION_FIELD: "{not json"})
        await until(lambda: client.xlen(dead) >= dead_before + 3, "3 dead letters")
        assert len((await runner.store.get(key)).events) == before
        assert [c.call_id for c in await runner.store.pending_calls(key)] == [pending.call_id]

        completions.post_result(pending.call_id, {"status": "resolved"})
        assert await orch.wait_until_settled(key, WAIT_S)
        with pytest.raises(CompletionError, match="already has its final result"):
            completions.post_result(pending.call_id, {"status": "reopened"})
        late = {**ghost, "call_id": pending.call_id, "session_key": key}
        client.xadd(stream, {COMPLETION_FIELD: json.dumps(late)})
        await until(lambda: client.xlen(dead) >= dead_before + 5, "5 dead letters")
        session = await runner.store.get(key)

    letters = client.xrange(dead)[dead_before:]
    reasons = [fields[b"reason"].decode() for _, fields in letters]
    assert len(reasons) == 5, reasons
    assert "no pending call with id 'tf-nope'" in reasons[0]
    assert sum("no pending call with id 'tf-ghost'" in r for r in reasons) == 1, reasons
    assert sum("malformed completion" in r for r in reasons) == 1, reasons
    assert sum(f"{pending.call_id!r} already has its final result" in r for r in reasons) == 2
    finals = [
        p.function_response.response
        for e in session.events
        if e.content
        for p in e.content.parts or ()
        if p.function_response and p.function_response.id == pending.call_id
    ]
    assert finals[-1] == {"status": "resolved"} and len(finals) == 2  # pending, then final
    assert session.events[-1].content is not None
    assert session.events[-1].content.parts[0].text == "ticket resolved"  # type: ignore[index]
    report_figure("refused completions dead-lettered", f"{len(reasons)} of 5")
