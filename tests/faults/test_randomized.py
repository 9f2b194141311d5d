"""A randomized run against the exactly-once promise, as a user would drive it.

Many sessions, each one turn of two normal calls, a ticket and an agent tool (whose
child session runs its own call on the fleet), started with
`toolfleet run` processes; two `toolfleet serve` replicas apply completions and sweep.
Each ticket's result is posted 0 to 3 times. The tool queues are on Redis, or on
RabbitMQ (through the outbox each replica relays). With faults, at random moments: `run`
replicas are SIGKILLed mid-turn, a worker is SIGKILLed and replaced, a `serve` replica
is SIGKILLed and replaced, and Redis is restarted once. Without faults the same load
must already hold the promise. At the end, whatever happened:

- every call id has exactly one final response in its session (a ticket: its pending
  response, then one final result if any was posted and the call was not answered
  otherwise);
- every posted completion was applied or is in the dead-letter stream with a reason, and
  so is every post refused at once: the stream holds exactly the refused ones;
- no ticket is left for an answered call, and no session of the user - an agent tool's
  child session included, whose worker may have been killed or cut short - has a call
  without a response;
- per call, the completion applied is the first one the stream accepted.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.faults.conftest import fault_settings
from tests.faults.rabbit import rabbit_vhost
from tests.faults.servers import RedisServer
from tests.faults.test_orchestrator_faults import toolfleet
from tests.support import until
from toolfleet import CompletionError, Completions, Event, Settings
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.shared.errors import ToolfleetError
from toolfleet.shared.keys import Keys, session_key

AGENT = "tests.faults.exactly_once_tools:chaos"
SESSIONS = 10
SEED = int(os.environ.get("TOOLFLEET_CHAOS_SEED", "0")) or random.SystemRandom().randrange(10**6)

Figure = Callable[[str, object], None]


@pytest.fixture(scope="module")
def chaos_server() -> Iterator[RedisServer]:
    """A server of this module's own: the run restarts it."""
    with RedisServer() as server:
        yield server


def events_of(client: redis.Redis, keys: Keys, session_id: str) -> list[Event]:
    key = session_key("chaos", "user", session_id)  # every session here is the run's user's
    return [Event.model_validate_json(e) for e in client.lrange(keys.events(key), 0, -1)]


def sessions_of_user(client: redis.Redis, keys: Keys) -> list[str]:
    """Every session the run's user has: the runs' own and their agent tools' children."""
    return sorted(raw.decode() for raw in client.smembers(keys.user_sessions("chaos", "user")))


def open_sessions(client: redis.Redis, keys: Keys) -> list[str]:
    """The user's sessions whose last model turn has a call without a response."""
    return [
        s
        for s in sessions_of_user(client, keys)
        if Session(s, "chaos", "user", events_of(client, keys, s)).open_turn() is not None
    ]


def parts(events: list[Event]) -> Iterator[Any]:
    for event in events:
        yield from (event.content.parts or ()) if event.content else ()


class Run:
    """The processes and bookkeeping of one randomized run."""

    def __init__(self, settings: Settings, client: redis.Redis, log_dir: Path) -> None:
        self.settings = settings
        self.client = client
        self.keys = Keys(settings.key_prefix)
        self.log_dir = log_dir
        self.runs: dict[str, subprocess.Popen[bytes]] = {}
        self.serves: list[subprocess.Popen[bytes]] = []
        self.posted: dict[str, list[tuple[str, str]]] = {}  # call id -> (entry id, marker)
        self.refused: list[str] = []  # markers of the posts refused at once
        self.kills = 0

    def start_serve(self) -> None:
        log = self.log_dir / f"serve-{len(self.serves)}.log"
        self.serves.append(toolfleet(self.settings, log, "serve", "--agent", AGENT))

    def start_run(self, session_id: str) -> None:
        log = self.log_dir / f"run-{session_id}.log"
        self.runs[session_id] = toolfleet(
            self.settings, log, "run", "--agent", AGENT, "--session", session_id,
            "--no-wait", f"go {session_id}",
        )  # fmt: skip

    def kill(self, process: subprocess.Popen[bytes]) -> None:
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait(10)
            self.kills += 1

    def ticket_of(self, session_id: str) -> str | None:
        """The session's ticket call id once a worker opened the ticket."""
        for call in Completions(self.client, self.keys).pending():
            if call.session_id == session_id:
                return call.call_id
        return None

    def post(self, session_id: str, call_id: str, copies: int) -> None:
        completions = Completions(self.client, self.keys)
        for copy in range(copies):
            marker = f"{session_id}/{copy}"
            try:
                entry = completions.post_result(call_id, {"status": "done", "post": marker})
            except CompletionError:  # refused: the call was answered otherwise
                self.refused.append(marker)  # and dead-lettered: checked at the end
                continue
            self.posted.setdefault(call_id, []).append((entry, marker))

    def settled(self) -> bool:
        if any(p.poll() is None for p in self.runs.values()):
            return False
        if self.client.scard(self.keys.resume()):
            return False
        if self.client.xlen(self.keys.completions("chaos")):
            return False
        # Children too: one whose worker was lost is closed once its lease lapses.
        return not open_sessions(self.client, self.keys)

    def without_ticket(self, found: dict[str, str]) -> str:
        """What a failure says of the sessions with no ticket yet: their stored events
        (author and kind) and the end of the logs of their run and of the serves."""
        lines = []
        for session_id in sorted(set(self.runs) - set(found)):
            events = events_of(self.client, self.keys, session_id)
            kinds = [f"{e.author}:{_kind(e)}" for e in events]
            lines.append(f"{session_id}: {kinds}")
            lines.append(_tail(self.log_dir / f"run-{session_id}.log"))
        lines += [_tail(self.log_dir / f"serve-{n}.log") for n in range(len(self.serves))]
        return "\n".join(lines)

    def stop(self) -> None:
        for process in [*self.runs.values(), *self.serves]:
            if process.poll() is None:
                process.terminate()
        for process in [*self.runs.values(), *self.serves]:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()


def _kind(event: Event) -> str:
    """Whether an event holds text, calls or responses (what a failure shows of it)."""
    held = list(parts([event]))
    if any(p.function_call for p in held):
        return "calls"
    if any(p.function_response for p in held):
        return "responses"
    return "text" if any(p.text for p in held) else "other"


def _tail(log: Path, lines: int = 15) -> str:
    """The last lines of a process's log, headed by its name."""
    text = log.read_text(errors="replace").splitlines()[-lines:] if log.exists() else []
    return "\n".join([f"--- {log.name}", *text])


async def kill_some_runs_mid_turn(run: Run, rng: random.Random, count: int) -> None:
    """SIGKILL `count` `run` replicas once their turn's calls are out."""
    victims = rng.sample(sorted(run.runs), count)
    for session_id in victims:

        def calls_out(s: str = session_id) -> bool:
            return any(p.function_call for p in parts(events_of(run.client, run.keys, s)))

        await until(calls_out, f"the turn of {session_id}", 60)
        await asyncio.sleep(rng.uniform(0, 0.3))  # ok: a random moment of the turn
        run.kill(run.runs[session_id])


@pytest.fixture(scope="module")
def rabbit() -> Iterator[str]:
    """A vhost of this module's own on the local RabbitMQ (the amqp runs)."""
    with rabbit_vhost() as url:
        yield url


@pytest.mark.timeout(420)  # a minute alone; three times that beside the suite's others
@pytest.mark.parametrize(
    ("broker", "faults"),
    # On RabbitMQ only the run with faults: the quiet run adds little to it, and each
    # run takes minutes.
    [("redis", False), ("redis", True), ("amqp", True)],
    ids=["no-faults", "faults", "amqp-faults"],
)
async def test_randomized_sessions_keep_the_exactly_once_promise(
    chaos_server: RedisServer,
    tmp_path: Path,
    broker: str,
    faults: bool,
    request: pytest.FixtureRequest,
    report_figure: Figure,
) -> None:
    # Where the tool queues are: Redis (None), or RabbitMQ through the outbox relay.
    broker_url = None if broker == "redis" else str(request.getfixturevalue("rabbit"))
    rng = random.Random(SEED)
    settings = fault_settings(
        chaos_server.url(), completion_claim_idle_s=2.0, broker_url=broker_url
    )
    client = redis.Redis.from_url(settings.require_redis_url())
    run = Run(settings, client, tmp_path)
    with WorkerGroup(settings) as workers:
        # A busy pool: 40 calls at once on 4 processes, each limited to 3 s.
        first_worker = workers.start(["default"], concurrency=2)
        workers.start(["default"], concurrency=2)
        workers.start(["agents"], concurrency=2)
        run.start_serve()
        run.start_serve()
        try:
            for i in range(SESSIONS):
                run.start_run(f"s{i}")
            if faults:
                await kill_some_runs_mid_turn(run, rng, 3)
                first_worker.kill()
                run.kills += 1
                workers.start(["default"], concurrency=2)
                chaos_server.restart()
                client.close()
                client = run.client = redis.Redis.from_url(settings.require_redis_url())
            tickets: dict[str, str] = {}

            def all_tickets_open() -> bool:
                for session_id in run.runs:
                    found = tickets.get(session_id) or run.ticket_of(session_id)
                    if found:
                        tickets[session_id] = found
                return len(tickets) == SESSIONS

            try:
                await until(all_tickets_open, "every session's ticket", 120)
            except ToolfleetError as e:
                raise AssertionError(f"{e}\n{run.without_ticket(tickets)}") from None
            victim_serve = rng.randrange(len(run.serves))
            for n, (session_id, call_id) in enumerate(sorted(tickets.items())):
                run.post(session_id, call_id, rng.randrange(4))
                if faults and n == SESSIONS // 2:
                    run.kill(run.serves[victim_serve])
                    run.start_serve()
            await until(run.settled, "every session to settle", 150)
        finally:
            run.stop()

    keys = run.keys
    dead = [
        (json.loads(fields[b"completion"]), fields[b"reason"].decode())
        for _, fields in client.xrange(keys.dead_letters())
    ]
    dead_markers = {d["response"].get("post"): reason for d, reason in dead}
    duplicates = lost = calls = applied = 0
    pending = {c.call_id for c in Completions(client, keys).pending()}
    for session_id in run.runs:
        events = events_of(client, keys, session_id)
        assert Session(session_id, "chaos", "u", events).open_turn() is None, session_id
        responses: dict[str, list[dict[str, Any]]] = {}
        for part in parts(events):
            if part.function_response:
                responses.setdefault(part.function_response.id, []).append(
                    dict(part.function_response.response or {})
                )
        call_ids = [p.function_call.id for p in parts(events) if p.function_call]
        calls += len(call_ids)
        for call_id in call_ids:
            answers = responses.get(call_id, [])
            finals = [a for a in answers if a.get("status") != "pending"]
            duplicates += max(0, len(finals) - 1)
            lost += 1 if not answers else 0
            posts = run.posted.get(call_id, [])
            for _, marker in posts:
                applied_here = {"status": "done", "post": marker} in finals
                applied += applied_here
                if not applied_here and marker not in dead_markers:
                    lost += 1  # neither applied nor dead-lettered
            claim = client.get(keys.applied(call_id))
            if claim is not None:  # the first completion the stream accepted won
                assert json.loads(claim)["entry"] == posts[0][0], (call_id, claim, posts)
            elif posts:  # none applied: only right if the call was answered otherwise
                assert finals and finals[0].get("status") == "error", (call_id, finals, posts)
            if finals:
                assert call_id not in pending, f"a ticket is left for answered call {call_id}"
    children = [s for s in sessions_of_user(client, keys) if s not in run.runs]
    assert children  # agent tools ran: the check below covers their child sessions
    assert open_sessions(client, keys) == []
    report_figure("seed", SEED)
    report_figure("sessions / calls / kills", f"{SESSIONS} / {calls} / {run.kills}")
    posted = sum(len(p) for p in run.posted.values())
    refused = len(run.refused)
    report_figure(
        "completions posted / applied / dead-lettered / refused at once",
        f"{posted} / {applied} / {len(dead)} / {refused}",
    )
    report_figure("duplicate final responses / lost", f"{duplicates} / {lost}")
    assert (duplicates, lost) == (0, 0)
    assert all(reason for _, reason in dead)
    # Every refused post is dead-lettered: at once by the poster, or accepted and then
    # refused by the applier; nothing else is.
    assert all(marker in dead_markers for marker in run.refused), (run.refused, dead_markers)
    assert len(dead) == refused + (posted - applied), (dead, run.refused, run.posted)
    client.close()
