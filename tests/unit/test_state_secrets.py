"""Secret-named state writes: sealed on the results stream and in the state hashes, masked
in stored events, opened only by the worker of a later call (fakeredis, no processes)."""

from __future__ import annotations

import base64
import json
import logging
import time
from typing import Any

import fakeredis
import pytest

from toolfleet.orchestrator.fleet.dispatch import CeleryPublisher
from toolfleet.orchestrator.loop.turn import responses_event
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.parked import ParkedTurns
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys, session_key
from toolfleet.shared.messages import CallStatus, ToolActions, ToolCall, ToolResult
from toolfleet.shared.redaction import (
    MASK,
    SEALED,
    may_name_secret,
    redact_deep,
    secret_name_set,
)
from toolfleet.shared.reporting import Feed, ResultReporter
from toolfleet.shared.sealing import Sealer, warn_without_fleet_key
from toolfleet.shared.signing import new_fleet_key
from toolfleet.workers.tool_runs import unsealed

NAMES = ["api_key", "password", "token", "secret"]
KEYS = Keys("t")
CLEAR = ("CLEAR-PW", "CLEAR-TOK", "CLEAR-LIST", "CLEAR-USER", "CLEAR-TEMP")
# What a tool writes: secret names at the top, nested, in a list, in the user scope, temp:.
WRITTEN: dict[str, Any] = {
    "password": "CLEAR-PW",
    "cfg": {"nested": {"token": "CLEAR-TOK"}, "items": [{"api_key": "CLEAR-LIST"}], "n": 1},
    "user:secret": "CLEAR-USER",
    "temp:token": "CLEAR-TEMP",
    "colour": "red",
}


def worker_result(delta: dict[str, Any]) -> ToolResult:
    return ToolResult(
        call_id="c1", tool="remember", session_id="s1", invocation_id="i1",
        status=CallStatus.SUCCESS, response={"ok": True}, state_delta=delta,
    )  # fmt: skip


def later_call(state: dict[str, Any]) -> ToolCall:
    return ToolCall(
        call_id="c2", tool="recall", args={}, session_id="s1", app_name="app", user_id="ann",
        invocation_id="i2", agent="a", state=state, reply_to="r", dispatched_at=time.time(),
    )  # fmt: skip


def everything(server: fakeredis.FakeServer) -> bytes:
    """Every value of every key, whatever its type: what a Redis reader can see."""
    client = fakeredis.FakeRedis(server=server)
    out: list[bytes] = []
    for key in client.scan_iter():
        kind = client.type(key).decode()
        if kind == "string":
            out.append(client.get(key) or b"")
        elif kind == "list":
            out += client.lrange(key, 0, -1)
        elif kind == "hash":
            out += [k + b"=" + v for k, v in client.hgetall(key).items()]
        elif kind == "set":
            out += list(client.smembers(key))
        elif kind == "stream":
            out += [b"".join(f.values()) for _, f in client.xrange(key)]
    return b"\n".join(out)


def posted(
    server: fakeredis.FakeServer, sealer: Sealer | None, delta: dict[str, Any]
) -> ToolResult:
    """`delta` posted as a worker posts it, read back from the session's stream."""
    client = fakeredis.FakeRedis(server=server)
    ResultReporter(client, 100, sealer=sealer, feed=Feed("feed", "feed-count")).post(
        "results", worker_result(delta)
    )
    ((_, fields),) = client.xrange("results")
    return ToolResult.model_validate_json(fields[b"result"])


def test_state_writes_are_sealed_at_any_depth_and_in_lists() -> None:
    sealer = Sealer(new_fleet_key(), NAMES)
    sealed = sealer.seal(WRITTEN, keep_sealed=False)
    assert not any(c in json.dumps(sealed) for c in CLEAR)
    assert set(sealed["cfg"]["items"][0]["api_key"]) == {SEALED}
    assert set(sealed["cfg"]["nested"]["token"]) == {SEALED}
    assert sealed["cfg"]["n"] == 1 and sealed["colour"] == "red"
    assert sealer.unseal(sealed) == WRITTEN
    assert redact_deep(sealed, NAMES)["cfg"] == {
        "nested": {"token": MASK}, "items": [{"api_key": MASK}], "n": 1,
    }  # fmt: skip


def test_a_sealed_shape_a_tool_writes_is_sealed_whole_and_never_opened() -> None:
    sealer = Sealer(new_fleet_key(), NAMES)
    stolen = sealer.seal({"token": "VICTIM"})["token"]  # read from Redis by an attacker
    delta = sealer.seal({"token": stolen, "x": [{"secret": stolen}]}, keep_sealed=False)
    # A later call's worker opens what the tool wrote: the shape, not the victim's value.
    assert sealer.unseal(delta) == {"token": stolen, "x": [{"secret": stolen}]}
    assert "VICTIM" not in json.dumps(sealer.unseal(delta))


async def test_a_worker_state_write_is_never_clear_in_redis_and_reaches_a_later_call() -> None:
    server = fakeredis.FakeServer()
    sealer = Sealer(new_fleet_key(), NAMES)
    result = posted(server, sealer, WRITTEN)
    assert not any(c.encode() in everything(server) for c in CLEAR)  # stream and feed
    redis = fakeredis.FakeAsyncRedis(server=server)
    store = SessionStore(redis, KEYS, NAMES, sealer=sealer)
    session = await store.create("app", "ann", "s1")
    await store.append(session, responses_event("i1", "a", [result], sealer))
    # A write made in the orchestrator (a callback's) is sealed in its hash too.
    own = Event(invocation_id="i1", author="a", state_delta={"app:api_key": "CLEAR-APP"})
    await store.append(session, own)
    stored = everything(server)
    assert not any(c.encode() in stored for c in (*CLEAR, "CLEAR-APP")), stored
    # Another replica reads what is stored: history masked, state sealed.
    read = await SessionStore(redis, KEYS, NAMES, sealer=sealer).get_or_create("app", "ann", "s1")
    worker_event, own_event = (e.state_delta for e in read.events)
    assert worker_event["password"] == MASK and worker_event["colour"] == "red"
    assert worker_event["cfg"]["items"] == [{"api_key": MASK}]
    assert own_event == {"app:api_key": MASK}
    assert set(read.state["password"]) == set(read.state["user:secret"]) == {SEALED}
    state = read.state
    publisher = CeleryPublisher(None, NAMES, sealer)  # type: ignore[arg-type]
    message = publisher.encode(publisher.dispatch(later_call(state), "q"))
    body = base64.b64decode(json.loads(message)["body"]).decode()
    assert not any(c in message + body for c in (*CLEAR, "CLEAR-APP"))
    _, kwargs, _ = json.loads(body)
    opened = unsealed(ToolCall.model_validate_json(kwargs["call"]), sealer, NAMES)
    expected = {k: v for k, v in WRITTEN.items() if not k.startswith("temp:")}
    assert opened.state == {**expected, "app:api_key": "CLEAR-APP"}


async def test_without_a_fleet_key_stored_events_mask_state_and_the_hash_keeps_it() -> None:
    server = fakeredis.FakeServer()
    result = posted(server, None, WRITTEN)
    redis = fakeredis.FakeAsyncRedis(server=server)
    store = SessionStore(redis, KEYS, NAMES)
    session = await store.create("app", "ann", "s1")
    await store.append(session, responses_event("i1", "a", [result]))
    read = await SessionStore(redis, KEYS, NAMES).get_or_create("app", "ann", "s1")
    (event,) = read.events
    assert not any(c in event.model_dump_json() for c in CLEAR)  # history: masked
    # The state itself: in clear (the start warns), so a later call's tool can read it.
    assert read.state["password"] == "CLEAR-PW"


def test_the_start_warning_without_a_fleet_key_names_state_too(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        warn_without_fleet_key(Settings(fleet_key=None))
        warn_without_fleet_key(Settings(fleet_key=new_fleet_key()))
    (record,) = caplog.records
    assert "arguments, results and state" in record.getMessage()
    assert "stored in clear in Redis" in record.getMessage()


async def test_a_parked_turn_keeps_state_writes_sealed_until_it_resumes() -> None:
    server = fakeredis.FakeServer()
    sealer = Sealer(new_fleet_key(), NAMES)
    parked = ParkedTurns(fakeredis.FakeAsyncRedis(server=server), KEYS, NAMES, sealer)
    # A callback's write (in clear in the orchestrator), beside a call that waits.
    done = worker_result(WRITTEN)
    waiting = worker_result({}).model_copy(
        update={"call_id": "c2", "actions": ToolActions(requested_confirmation={"hint": "ok?"})}
    )
    await parked.park("turn1", [done, waiting], None)
    assert not any(c.encode() in everything(server) for c in CLEAR)
    resumed = await parked.complete(
        "turn1",
        worker_result({}).model_copy(update={"call_id": "c2"}),
        None,
        session_key("app", "ann", "s1"),
    )
    assert resumed.ordered is not None
    assert sealer.unseal(resumed.ordered[0].state_delta) == WRITTEN  # applied with the real values


def test_the_secret_name_prefilter_passes_only_text_that_names_no_secret() -> None:
    names = secret_name_set(NAMES)
    assert not may_name_secret('{"city": "Oslo", "n": 1}', names)
    assert may_name_secret('{"Api_Key": "x"}', names)  # case-insensitive, as masking is
    assert may_name_secret('{"user:password": "x"}', names)  # scoped keys
    assert may_name_secret('{"note": "my token"}', names)  # in a value: walked, not masked
    assert may_name_secret('{"\u212aey": 1}', secret_name_set(["key"]))  # KELVIN SIGN -> k
    # A name JSON would escape may be spelled otherwise in the text: always walked.
    assert may_name_secret('{"a": 1}', secret_name_set(['we"ird']))


async def test_a_wide_turn_is_masked_whether_or_not_its_text_names_a_secret() -> None:
    redis = fakeredis.FakeAsyncRedis()
    store = SessionStore(redis, KEYS, NAMES)
    session = await store.create("app", "ann", "s1")
    plain = [worker_result({}).model_copy(update={"call_id": f"c{i}"}) for i in range(50)]
    secret = plain[-1].model_copy(update={"response": {"nested": {"PassWord": "CLEAR-PW"}}})
    await store.append(session, responses_event("i1", "a", plain))
    await store.append(session, responses_event("i2", "a", [*plain[:-1], secret]))
    events = await redis.lrange(KEYS.events(session.key), 0, -1)
    assert len(events) == 2
    assert b'"ok":true' in events[0] and b"***" not in events[0]  # stored as dumped
    assert b"CLEAR-PW" not in events[1] and b'"PassWord":"***"' in events[1]
