"""The orchestrator dies mid-turn; two replicas share the sessions.

Invariant under test: per function call id exactly one function response reaches the
model, finished calls are not sent again, and the transcript is the uninterrupted one.
The kills run with the tool queues on Redis and on RabbitMQ (tests.faults.brokers): there
a replica's calls wait in the Redis outbox until a relay - its own, or another replica's
holding the relay's lease - publishes them, and a killed replica's relay dies with it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.faults import probe
from tests.faults.brokers import ON_EACH_BROKER, REDIS_ONLY
from tests.faults.fault_tools import ANSWERING_MARK_ENV, three_steps
from tests.faults.replicas import started
from toolfleet.orchestrator.cli.embedded import wait_for
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.shared.cancellation import cancel_session
from toolfleet.shared.completions import Completions
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import SessionError
from toolfleet.shared.keys import Keys, SessionKey, session_key

pytestmark = ON_EACH_BROKER

AGENT = "tests.faults.fault_tools:three_steps"
TWO_IN_LINE = "tests.faults.fault_tools:two_in_line"

Figure = Callable[[str, object], None]


def toolfleet_env(settings: Settings) -> dict[str, str]:
    return {
        **os.environ,
        "TOOLFLEET_REDIS_URL": settings.require_redis_url(),
        "TOOLFLEET_BROKER_URL": settings.broker_url or "",
        "TOOLFLEET_KEY_PREFIX": settings.key_prefix,
        "TOOLFLEET_TOOL_MODULES": ",".join(settings.tool_modules),
        "TOOLFLEET_DEFAULT_TIMEOUT_S": str(settings.default_timeout_s),
        "TOOLFLEET_RESULT_GRACE_S": str(settings.result_grace_s),
        "TOOLFLEET_LEASE_TTL_S": str(settings.lease_ttl_s),
        "TOOLFLEET_FLEET_KEY": settings.fleet_key or "",  # the workers run signed calls only
    }


def toolfleet(settings: Settings, log: Path, *args: str) -> subprocess.Popen[bytes]:
    """A replica: `toolfleet run` or `toolfleet serve`, its output in `log`."""
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "toolfleet", "-v", *args],
            env=toolfleet_env(settings),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return started(process)  # stopped after the test, also when it fails midway


def replica_running_a_turn(
    settings: Settings, log: Path, session_id: str
) -> subprocess.Popen[bytes]:
    """`toolfleet run`: one message to the agent in `session_id` (an orchestrator)."""
    return toolfleet(
        settings, log, "run", "--agent", AGENT, "--session", session_id, "--no-wait", "go"
    )


def of_cli(app: str, session_id: str) -> SessionKey:
    """The key of a session `toolfleet run` started (its default user, "user")."""
    return session_key(app, "user", session_id)


def stored_events(client: redis.Redis, settings: Settings, session: SessionKey) -> list[Event]:
    raw = client.lrange(Keys(settings.key_prefix).events(session), 0, -1)
    return [Event.model_validate_json(e) for e in raw]


def transcript(events: list[Event]) -> list[tuple[Any, ...]]:
    """What the model saw, without ids and times."""
    lines: list[tuple[Any, ...]] = []
    for event in events:
        for part in event.content.parts or () if event.content else ():
            if part.text:
                lines.append((event.author, "text", part.text))
            if part.function_call:
                fc = part.function_call
                lines.append((event.author, "call", fc.name, dict(fc.args or {})))
            if part.function_response:
                fr = part.function_response
                lines.append((event.author, "response", fr.name, dict(fr.response or {})))
    return lines


def response_ids(events: list[Event]) -> list[str]:
    return [
        part.function_response.id or ""
        for event in events
        for part in (event.content.parts or () if event.content else ())
        if part.function_response
    ]


def call_ids(events: list[Event]) -> list[str]:
    return [
        part.function_call.id or ""
        for event in events
        for part in (event.content.parts or () if event.content else ())
        if part.function_call
    ]


def answered(client: redis.Redis, settings: Settings, session: SessionKey) -> bool:
    events = stored_events(client, settings, session)
    last = events[-1].content if events else None
    return last is not None and last.role == "model" and any(p.text for p in last.parts or ())


def kill_mid_turn(
    process: subprocess.Popen[bytes], client: redis.Redis, settings: Settings, session: SessionKey
) -> list[str]:
    """SIGKILL the replica once two calls have answered and the slow third one runs."""
    results = Keys(settings.key_prefix).results(session)

    def slow_call_running() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"the replica exited early (exit code {process.returncode})")
        ids = call_ids(stored_events(client, settings, session))
        started = [i for i in ids if probe.executions(client, settings.key_prefix, i)]
        return len(ids) == 3 and len(started) == 3 and client.xlen(results) >= 2

    wait_for(slow_call_running, 60, "two calls answered and the third running")
    process.send_signal(signal.SIGKILL)
    process.wait(10)
    return call_ids(stored_events(client, settings, session))


async def uninterrupted(settings: Settings, session_id: str) -> list[Event]:
    async with Runner(three_steps, settings) as runner:
        await runner.ask(user_id="u", session_id=session_id, message="go")
        return (await runner.store.get(session_key(runner.app_name, "u", session_id))).events


def assert_one_response_per_call(
    client: redis.Redis, settings: Settings, events: list[Event], ids: list[str]
) -> None:
    assert sorted(response_ids(events)) == sorted(ids)  # each call answered exactly once
    runs = {i: probe.executions(client, settings.key_prefix, i) for i in ids}
    assert runs == dict.fromkeys(ids, 1), f"executions per call: {runs}"  # none sent again


def test_an_orchestrator_killed_mid_turn_is_continued_from_redis_by_the_next_one(
    settings: Settings,
    workers: WorkerGroup,
    client: redis.Redis,
    report_figure: Figure,
    tmp_path: Path,
) -> None:
    workers.start(["default"], concurrency=3)
    first = replica_running_a_turn(settings, tmp_path / "first.log", "s-killed")
    ids = kill_mid_turn(first, client, settings, of_cli("three_steps", "s-killed"))
    killed_at = time.monotonic()
    assert not answered(client, settings, of_cli("three_steps", "s-killed"))

    restarted = toolfleet(settings, tmp_path / "restarted.log", "serve", "--agent", AGENT)
    try:
        wait_for(
            lambda: answered(client, settings, of_cli("three_steps", "s-killed")),
            30,
            "the restarted replica",
        )
        recovered_s = time.monotonic() - killed_at
    finally:
        restarted.send_signal(signal.SIGTERM)
        restarted.wait(15)

    events = stored_events(client, settings, of_cli("three_steps", "s-killed"))
    assert_one_response_per_call(client, settings, events, ids)
    reference = asyncio.run(uninterrupted(settings, "s-reference"))
    assert transcript(events) == transcript(reference)
    # The continued turn keeps its invocation: one invocation, as if nothing happened.
    assert len({e.invocation_id for e in events}) == 1
    report_figure("kill -> answer (restart + lease expiry + rest)", f"{recovered_s:.2f} s")
    report_figure("calls sent again", 0)


def test_a_live_replica_takes_over_the_sessions_of_a_replica_that_died(
    settings: Settings,
    workers: WorkerGroup,
    client: redis.Redis,
    report_figure: Figure,
    tmp_path: Path,
) -> None:
    workers.start(["default"], concurrency=3)
    survivor_log = tmp_path / "survivor.log"
    survivor = toolfleet(settings, survivor_log, "serve", "--agent", AGENT)
    try:
        # Up before the other dies.
        wait_for(lambda: b"toolfleet serve" in survivor_log.read_bytes(), 60, "the survivor")
        doomed = replica_running_a_turn(settings, tmp_path / "doomed.log", "s-orphan")
        ids = kill_mid_turn(doomed, client, settings, of_cli("three_steps", "s-orphan"))
        killed_at = time.monotonic()
        wait_for(
            lambda: answered(client, settings, of_cli("three_steps", "s-orphan")),
            30,
            "the surviving replica",
        )
        takeover_s = time.monotonic() - killed_at
    finally:
        survivor.send_signal(signal.SIGTERM)
        survivor.wait(15)

    assert_one_response_per_call(
        client, settings, stored_events(client, settings, of_cli("three_steps", "s-orphan")), ids
    )
    bound = 2 * settings.lease_ttl_s  # lease expiry, then at most one scan period
    report_figure("kill -> answer (takeover by a live replica)", f"{takeover_s:.2f} s")
    report_figure("takeover bound: lease TTL + scan period", f"{bound:g} s + the slow call")


# The session's lease, in Redis, keeps one replica out; the broker plays no part.
@REDIS_ONLY
async def test_two_replicas_never_run_one_session_at_once(
    settings: Settings, workers: WorkerGroup
) -> None:
    workers.start(["default"], concurrency=3)
    async with Runner(three_steps, settings) as one, Runner(three_steps, settings) as two:

        async def ask(runner: Runner) -> str:
            return await runner.ask(user_id="u", session_id="s-contended", message="go")

        outcomes = await asyncio.gather(ask(one), ask(two), return_exceptions=True)
        refused = [o for o in outcomes if isinstance(o, SessionError)]
        assert len(refused) == 1, outcomes
        assert "being run by another orchestrator" in str(refused[0])
        assert "finished steps [1, 2, 3]" in outcomes

        events = (await one.store.get(session_key(one.app_name, "u", "s-contended"))).events
        assert len({e.invocation_id for e in events}) == 1  # one invocation ran
        assert len(response_ids(events)) == 3
        # Once the lease is released, the other replica may run the session.
        assert await two.ask(user_id="u", session_id="s-contended", message="go") == (
            "finished steps [1, 2, 3]"
        )


# The calls ran before the kill: what the next replica needs waits on the session's
# Redis stream, and nothing is sent again, whichever the broker.
@REDIS_ONLY
def test_an_orchestrator_killed_while_the_model_answers_the_results_it_was_given(
    settings: Settings,
    workers: WorkerGroup,
    client: redis.Redis,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Given a turn whose calls' results reached the model but are not stored yet (they
    ride on the answer's write: loop/held.py), when the orchestrator dies before the model
    answers, then the next replica answers the turn from the results still on the stream:
    one response per call, no call run again, the uninterrupted transcript."""
    mark = tmp_path / "answering"
    monkeypatch.setenv(ANSWERING_MARK_ENV, str(mark))
    workers.start(["default"], concurrency=2)
    agent = "tests.faults.fault_tools:answers_slowly"
    first = toolfleet(
        settings, tmp_path / "first.log", "run", "--agent", agent, "--session", "s-held",
        "--no-wait", "go",
    )  # fmt: skip
    wait_for(mark.exists, 60, "the model answering the calls' results")
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    held = stored_events(client, settings, of_cli("answers_slowly", "s-held"))
    ids = call_ids(held)
    # Killed in the window under test: the calls ran and answered; nothing stored their
    # responses, which wait on the session's stream.
    assert len(ids) == 2 and response_ids(held) == []
    assert client.xlen(Keys(settings.key_prefix).results(of_cli("answers_slowly", "s-held"))) == 2

    restarted = toolfleet(settings, tmp_path / "restarted.log", "serve", "--agent", agent)
    try:
        wait_for(
            lambda: answered(client, settings, of_cli("answers_slowly", "s-held")),
            30,
            "the restarted replica",
        )
    finally:
        restarted.send_signal(signal.SIGTERM)
        restarted.wait(15)

    events = stored_events(client, settings, of_cli("answers_slowly", "s-held"))
    assert_one_response_per_call(client, settings, events, ids)
    assert transcript(events)[-1] == ("answers_slowly", "text", "finished steps [1, 2]")
    assert len({e.invocation_id for e in events}) == 1
    assert (
        client.xlen(Keys(settings.key_prefix).results(of_cli("answers_slowly", "s-held"))) == 0
    )  # trimmed when stored


def cancelled_while_orphaned(
    settings: Settings, client: redis.Redis, log: Path, session_id: str
) -> tuple[SessionKey, str, str]:
    """A `two_in_line` turn whose replica is killed while its first call runs and its
    second waits in the queue, then cancelled: the session and the two calls' ids."""
    session = of_cli("two_in_line", session_id)
    doomed = toolfleet(
        settings, log, "run", "--agent", TWO_IN_LINE, "--session", session_id, "--no-wait", "go"
    )

    def first_running() -> bool:
        ids = call_ids(stored_events(client, settings, session))
        return len(ids) == 2 and probe.executions(client, settings.key_prefix, ids[0]) == 1

    wait_for(first_running, 60, "the first call to run and the second to wait")
    doomed.send_signal(signal.SIGKILL)
    doomed.wait(10)
    first, second = call_ids(stored_events(client, settings, session))
    keys = Keys(settings.key_prefix)
    cancel_session(client, keys, Completions(client, keys), session)
    return session, first, second


def error_types(events: list[Event], call_ids: tuple[str, ...]) -> list[tuple[str, Any]]:
    """The error type of each response to one of `call_ids` (None: not an error), sorted."""
    return sorted(
        (part.function_response.id or "", (part.function_response.response or {}).get("error_type"))
        for event in events
        for part in (event.content.parts or () if event.content else ())
        if part.function_response and part.function_response.id in call_ids
    )


def test_a_session_cancelled_while_no_replica_runs_it_is_stopped_by_the_next_one(
    settings: Settings, workers: WorkerGroup, client: redis.Redis, tmp_path: Path
) -> None:
    """Given a replica killed mid-turn (one call running, one waiting in the queue), the
    user's cancellation finds no replica to stop the turn. The replica that takes the
    session over answers both calls Cancelled, does not call the model again, and the
    call that waited never runs."""
    workers.start(["default"], concurrency=1)
    session, first, second = cancelled_while_orphaned(
        settings, client, tmp_path / "doomed.log", "s-orphan"
    )
    keys = Keys(settings.key_prefix)

    successor = toolfleet(settings, tmp_path / "successor.log", "serve", "--agent", TWO_IN_LINE)
    try:
        wait_for(
            lambda: len(response_ids(stored_events(client, settings, session))) == 2,
            30,
            "the successor to answer the turn",
        )
        wait_for(lambda: not client.exists(keys.cancelled(session)), 10, "the turn to end")
    finally:
        successor.send_signal(signal.SIGTERM)
        successor.wait(15)

    events = stored_events(client, settings, session)
    assert error_types(events, (first, second)) == sorted(
        [(first, "Cancelled"), (second, "Cancelled")]
    )
    assert not answered(client, settings, session)  # the model was not asked again
    assert probe.executions(client, settings.key_prefix, second) == 0


def test_a_message_after_such_a_cancellation_runs_once_the_turn_is_answered_cancelled(
    settings: Settings, workers: WorkerGroup, client: redis.Redis, tmp_path: Path
) -> None:
    """The same, but the user's next message comes before any replica took the session
    over: the turn it finds open is answered Cancelled, and then the model answers it."""
    workers.start(["default"], concurrency=1)
    session, first, second = cancelled_while_orphaned(
        settings, client, tmp_path / "doomed.log", "s-next"
    )
    keys = Keys(settings.key_prefix)

    # Once the dead replica's lease has lapsed (it would wait that long for it anyway)
    wait_for(lambda: not client.exists(keys.lease(session)), 10, "the lease to lapse")
    nxt = toolfleet(
        settings, tmp_path / "next.log", "run", "--agent", TWO_IN_LINE,
        "--session", "s-next", "--no-wait", "and now?",
    )  # fmt: skip
    assert nxt.wait(30) == 0

    events = stored_events(client, settings, session)
    assert error_types(events, (first, second)) == sorted(
        [(first, "Cancelled"), (second, "Cancelled")]
    )
    # The message after it was answered: its model ran (its script from the start: a new
    # turn of calls, run, then the answer).
    assert answered(client, settings, session)
    assert len(call_ids(events)) == 4
    assert probe.executions(client, settings.key_prefix, second) == 0
