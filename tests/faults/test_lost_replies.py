"""A session write that Redis applied but whose reply was lost (the connection broke
in between) is retried by the client's outage policy: the retry must not apply it twice.

Before the fix, a retried fenced write pushed its event again (a second user message, a
second model turn, a second function response for each call id: the invariant broken
with no crash at all), re-sent its calls' messages, and the answer that released the
lease was refused as "lease lost" although it had landed.

The tests that send calls run with the tool queues on Redis and on RabbitMQ
(tests.faults.brokers): there the sends go into the Redis outbox, and the outbox relay's
own commands lose replies too. The others write sessions, creates and ticket results -
Redis alone, whichever the broker - and run on Redis only.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import redis
from google.genai import types

from tests.faults import probe
from tests.faults.brokers import AMQP_ONLY, ON_EACH_BROKER, REDIS_ONLY, Broker, SentCopies
from tests.faults.fault_tools import step, three_steps
from tests.faults.reply_loss import ReplyLosingProxy, reply_losing_proxy
from tests.faults.test_exactly_once import stored_events
from tests.faults.test_orchestrator_faults import call_ids, response_ids
from tests.support import tool_call
from toolfleet import Event, Runner, Settings
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.connections import command_client
from toolfleet.orchestrator.fleet import outbox
from toolfleet.orchestrator.fleet.dispatch import CeleryPublisher
from toolfleet.orchestrator.fleet.protocol import PlannedCall
from toolfleet.orchestrator.sessions.fencing import _FENCED, _GUARDED, _ONCE, Fence
from toolfleet.orchestrator.sessions.leases import Leases
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.orchestrator.sessions.store import _CREATE, SessionStore
from toolfleet.shared.celery_wire.rabbitmq import AmqpPublisher
from toolfleet.shared.completions import _POST as _COMPLETION_POST
from toolfleet.shared.completions import Completions
from toolfleet.shared.errors import SessionExistsError
from toolfleet.shared.keys import Keys, queue_name, session_key
from toolfleet.shared.messages import CallStatus, PendingCall
from toolfleet.shared.outages import sync_retry

pytestmark = ON_EACH_BROKER

FENCED, GUARDED = _FENCED.sha.encode(), _GUARDED.sha.encode()


@pytest.fixture
def client(settings: Settings) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(settings.require_redis_url())
    # Known to the server, so that every session write is an EVALSHA the proxy can spot.
    for script in (_FENCED, _GUARDED, _ONCE, _CREATE):
        client.script_load(script.text)
    yield client
    client.close()


@pytest.fixture
def proxy(settings: Settings) -> Iterator[ReplyLosingProxy]:
    with reply_losing_proxy(settings.require_redis_url()) as proxy:
        yield proxy


def user_event(text: str) -> Event:
    content = types.Content(role="user", parts=[types.Part(text=text)])
    return Event(invocation_id="inv-1", author="user", content=content)


@contextlib.asynccontextmanager
async def leased_session(
    settings: Settings, proxy: ReplyLosingProxy, session_id: str
) -> AsyncIterator[tuple[SessionStore, Session, Fence]]:
    """A new session, its lease held, and a store that reaches Redis through `proxy`."""
    keys = Keys(settings.key_prefix)
    commands = command_client(proxy.url)
    try:
        store = SessionStore(commands, keys)
        leases = Leases(commands, keys, "replica-a", ttl_s=30)
        session = await store.create("app", "u", session_id)
        token = leases.token()
        await leases.acquire(session.key, token)
        yield store, session, leases.fence(session.key, token)
    finally:
        await commands.aclose()


@REDIS_ONLY
@pytest.mark.parametrize("release", [False, True], ids=["write", "write-and-release"])
async def test_a_fenced_write_whose_reply_was_lost_is_applied_once(
    settings: Settings, client: redis.Redis, proxy: ReplyLosingProxy, release: bool
) -> None:
    """Given a session under a lease, when an append's reply is lost after Redis ran it,
    then the append returns (no LeaseLostError, even when it released the lease), the
    event is stored once, and the released lease stays released."""
    async with leased_session(settings, proxy, "lost-reply") as (store, session, fence):
        proxy.lose_reply_of(FENCED)
        await store.append(session, user_event("hello"), fence=fence, release=release)
    keys = Keys(settings.key_prefix)
    assert proxy.armed == 0 and len(proxy.lost) == 1  # the reply was lost, the write retried
    assert [e.content.parts[0].text for e in stored_events(client, keys, session.key)
            if e.content and e.content.parts] == ["hello"]  # fmt: skip
    assert (client.get(keys.lease(session.key)) is None) is release


@REDIS_ONLY
async def test_a_write_retried_again_and_again_is_still_applied_once(
    settings: Settings, client: redis.Redis, proxy: ReplyLosingProxy
) -> None:
    """The same write's reply lost three times in a row (each retry too): one event."""
    async with leased_session(settings, proxy, "lost-thrice") as (store, session, fence):
        proxy.lose_reply_of(FENCED, times=3)
        await store.append(session, user_event("once"), fence=fence)
    assert len(proxy.lost) == 3
    assert client.llen(Keys(settings.key_prefix).events(session.key)) == 1


async def test_two_turns_whose_every_command_loses_its_first_reply_store_each_event_once(
    settings: Settings,
    client: redis.Redis,
    proxy: ReplyLosingProxy,
    workers: WorkerGroup,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Given every distinct command the orchestrator sends losing its first reply (the
    lease taken with the read that appends the message, the model turn that sends the
    calls, the answer that stores their responses and releases the lease, the results
    reader's reads, every other read), then each turn stores one user message,
    one model turn, one response per call id and one answer, and each call ran once."""
    workers.start(["default"], concurrency=3)
    copies = SentCopies(Broker(settings, client), monkeypatch)
    proxy.lose_each_reply_of(b"")  # every command's first arrival: its retry passes
    # Each batch of new commands is cut once per command, and every retry of a caller waits
    # longer (up to a second): a renewal that shares the wire with such batches can take
    # seconds, and a lease of 2 s, or 6, ran out on a loaded machine. What is tested is that
    # each write is applied once, not how short a lease may be.
    through_proxy = settings.model_copy(update={"redis_url": proxy.url, "lease_ttl_s": 30})
    async with Runner(three_steps, through_proxy) as runner:
        answers = [
            await asyncio.wait_for(runner.ask(user_id="u", session_id="s", message=m), 60)
            for m in ("first", "second")
        ]
    assert answers == ["finished steps [1, 2, 3]"] * 2
    lost = {name: sum(name in c for c in proxy.lost) for name in (FENCED, GUARDED, b"XREAD")}
    # Each turn's message rides the session read as a guarded write; then the model turn
    # with its sends and the answer with the (held) responses and the release are fenced.
    assert lost[FENCED] >= 4 and lost[GUARDED] == 2 and lost[b"XREAD"] >= 1, lost
    keys = Keys(settings.key_prefix)
    events = stored_events(client, keys, session_key(runner.app_name, "u", "s"))
    texts = [p.text for e in events if e.content for p in e.content.parts or () if p.text]
    assert texts == ["first", "finished steps [1, 2, 3]", "second", "finished steps [1, 2, 3]"]
    calls = call_ids(events)
    assert len(calls) == 6 and sorted(response_ids(events)) == sorted(calls)
    assert [probe.executions(client, settings.key_prefix, c) for c in calls] == [1] * 6
    assert [copies.of(c) for c in calls] == [1] * 6


@REDIS_ONLY
async def test_a_create_whose_reply_was_lost_returns_the_session_it_created(
    settings: Settings, client: redis.Redis, proxy: ReplyLosingProxy
) -> None:
    """A create's retry finds the session there - its own: it is returned, not refused
    as taken; creating the same id again is still refused."""
    keys = Keys(settings.key_prefix)
    commands = command_client(proxy.url)
    try:
        store = SessionStore(commands, keys)
        proxy.lose_reply_of(_CREATE.sha.encode())
        session = await store.create("app", "u", "created-once")
        assert proxy.armed == 0 and (session.app_name, session.user_id) == ("app", "u")
        with pytest.raises(SessionExistsError, match="exists already"):
            await store.create("app", "u", "created-once")
    finally:
        await commands.aclose()


async def test_calls_sent_outside_a_session_whose_send_lost_its_reply_run_once(
    settings: Settings,
    client: redis.Redis,
    proxy: ReplyLosingProxy,
    workers: WorkerGroup,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CeleryFleet.run alone (no lease: the MCP server's way): the send that pushes the
    task messages loses its reply and is retried; each call is queued and run once."""
    workers.start(["default"], concurrency=2)
    copies = SentCopies(Broker(settings, client), monkeypatch)
    through_proxy = settings.model_copy(update={"redis_url": proxy.url})
    keys = Keys(settings.key_prefix)
    async with Runner(three_steps, through_proxy) as runner:
        stream = keys.results(session_key("app", "u", "alone"))  # tool_call's app and user
        args = [{"n": n, "seconds": 0.05} for n in (1, 2)]
        calls = [tool_call(f"alone-{a['n']}", "step", "alone", stream, a) for a in args]
        proxy.lose_reply_of(_ONCE.sha.encode())
        planned = [PlannedCall(call, step) for call in calls]
        results = [r async for r in runner.tool_runner.run(planned)]
        await runner.tool_runner.settle(session_key("app", "u", "alone"))
    assert proxy.armed == 0 and len(proxy.lost) == 1
    assert sorted(r.call_id for r in results) == ["alone-1", "alone-2"]
    assert {r.status for r in results} == {CallStatus.SUCCESS}
    assert [probe.executions(client, settings.key_prefix, c.call_id) for c in calls] == [1, 1]
    assert [copies.of(c.call_id) for c in calls] == [1, 1]  # no second copy sent either


@REDIS_ONLY
def test_a_completion_whose_post_lost_its_reply_is_posted_once(
    settings: Settings, client: redis.Redis, proxy: ReplyLosingProxy
) -> None:
    """A ticket's result posted through a connection that breaks after Redis added it:
    the retry answers the entry the first arrival added, and adds none - no second copy
    to be refused later as "already has its final result"."""
    keys = Keys(settings.key_prefix)
    ticketed = session_key("app", "u", "ticketed")  # tool_call's app and user
    call = tool_call("ticket-1", "open_case", "ticketed", keys.results(ticketed))
    assert Completions(client, keys).register(PendingCall.starting(call))
    client.script_load(_COMPLETION_POST.text)
    through_proxy = redis.Redis.from_url(proxy.url, retry=sync_retry())
    try:
        proxy.lose_reply_of(_COMPLETION_POST.sha.encode())
        entry = Completions(through_proxy, keys).post_result("ticket-1", {"status": "closed"})
    finally:
        through_proxy.close()
    assert proxy.armed == 0 and len(proxy.lost) == 1
    assert [e.decode() for e, _ in client.xrange(keys.completions("app"))] == [entry]
    assert client.lrange(keys.completion_order(ticketed), 0, -1) == [entry.encode()]


@AMQP_ONLY
async def test_a_relay_removal_whose_reply_was_lost_leaves_the_messages_behind_it(
    settings: Settings,
    client: redis.Redis,
    proxy: ReplyLosingProxy,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Given the outbox relay publishing the oldest message while another turn writes
    one behind it, when the removal of what it published loses its reply (and is sent
    again), then the second message is left in the outbox and published next: one copy
    of each on RabbitMQ, none lost."""
    keys = Keys(settings.key_prefix)
    pool = f"relayed-{uuid.uuid4().hex[:6]}"  # a queue no worker takes
    stream = keys.results(session_key("app", "u", "relayed"))  # tool_call's app and user
    commands = command_client(proxy.url)
    messages = CeleryPublisher(commands)
    calls = [tool_call(f"relayed-{n}", "step", "relayed", stream) for n in (1, 2)]
    first, second = [messages.encode(messages.dispatch(c, queue_name(pool))) for c in calls]
    client.lpush(outbox.outbox_key(keys), first)
    publish = AmqpPublisher.publish

    def while_another_turn_writes(publisher: AmqpPublisher, raws: list[bytes]) -> None:
        publish(publisher, raws)
        if raws == [first.encode()]:
            client.lpush(outbox.outbox_key(keys), second)

    monkeypatch.setattr(AmqpPublisher, "publish", while_another_turn_writes)
    client.script_load(outbox._REMOVE.text)
    relay = outbox.OutboxRelay(commands, keys, settings.require_broker_url())
    try:
        proxy.lose_reply_of(outbox._REMOVE.sha.encode())
        assert await relay.relay_once() == 1
        assert proxy.armed == 0 and len(proxy.lost) == 1
        assert client.lrange(outbox.outbox_key(keys), 0, -1) == [second.encode()]
        assert await relay.relay_once() == 1
    finally:
        await relay.stop()
        await commands.aclose()
    assert client.llen(outbox.outbox_key(keys)) == 0
    assert Broker(settings, client).waiting(pool) == 2
