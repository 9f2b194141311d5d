"""A wide turn's large state, stored once for its calls and named by each message: what
the orchestrator writes, what a worker loads, and what a call whose snapshot is gone gets."""

from __future__ import annotations

import base64
import json
import time
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import fakeredis
import pytest

from tests.support import LocalTool
from tests.unit.test_delivery_guard import KEYS, guarded_deps
from toolfleet.orchestrator.fleet.celery_fleet import TurnStates
from toolfleet.orchestrator.fleet.dispatch import CeleryPublisher
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import session_key
from toolfleet.shared.messages import RESULT_FIELD, CallStatus, ToolCall, ToolResult
from toolfleet.shared.reporting import _POST as POST
from toolfleet.shared.sealing import Sealer
from toolfleet.shared.signing import new_fleet_key
from toolfleet.shared.state_snapshots import (
    INLINE_STATE_MAX_BYTES,
    SnapshotLoader,
    digest_of,
)
from toolfleet.workers.deliveries import _COUNT as COUNT
from toolfleet.workers.tool_runs import ToolRuns

S = session_key("app", "u", "s")
STREAM = "t:results:s"
SETTINGS = Settings(redis_url="redis://unused", key_prefix="t")
LARGE = {"doc": "x" * (2 * INLINE_STATE_MAX_BYTES), "user:api_key": "sk-canary"}


def make_call(call_id: str, state: dict[str, Any]) -> ToolCall:
    return ToolCall(
        call_id=call_id, tool="read_doc", args={}, session_id="s", app_name="app",
        user_id="u", invocation_id="i", agent="a", state=state, reply_to=STREAM,
        dispatched_at=time.time(),
    )  # fmt: skip


def sent_envelope(raw: bytes) -> ToolCall:
    """The envelope a message on the queue carries."""
    body = json.loads(base64.b64decode(json.loads(raw)["body"]))
    return ToolCall.model_validate_json(body[1]["call"])


async def test_a_small_state_travels_in_each_message_as_before(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    publisher = CeleryPublisher(fake_redis)  # type: ignore[arg-type]
    states = TurnStates(publisher, KEYS, lambda: 60)
    call = make_call("c1", {"city": "Oslo"})

    dispatch = publisher.dispatch(call, "tools.default", states.of(call))
    await publisher.publish([dispatch], record_in="sent")

    sent = sent_envelope(await fake_redis.rpop("tools.default"))
    assert sent.state == {"city": "Oslo"} and sent.state_ref is None
    assert await fake_redis.keys("t:statesnap:*") == []


async def test_a_large_state_is_stored_once_with_the_calls_that_name_it(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    key = new_fleet_key()
    publisher = CeleryPublisher(fake_redis, sealer=Sealer(key, ["api_key"]))  # type: ignore[arg-type]
    states = TurnStates(publisher, KEYS, lambda: 90)
    # Each call's envelope has its own copy of the session's state (make_envelope).
    calls = [make_call(f"c{i}", dict(LARGE)) for i in range(3)]

    dispatches = [publisher.dispatch(c, "tools.default", states.of(c)) for c in calls]
    await publisher.publish(dispatches, record_in="sent")

    (stored_key,) = await fake_redis.keys("t:statesnap:*")
    text = await fake_redis.get(stored_key)
    assert 0 < await fake_redis.ttl(stored_key) <= 90
    sent = [sent_envelope(m) for m in await fake_redis.lrange("tools.default", 0, -1)]
    # Every message names the one snapshot, and carries no state of its own.
    assert {s.state_ref for s in sent} == {digest_of(text)}
    assert all(s.state == {} for s in sent)
    assert all(len(m) < len(LARGE["doc"]) for m in await fake_redis.lrange("tools.default", 0, -1))
    assert stored_key.decode() == KEYS.state_snapshot(S, digest_of(text))
    # Stored as sent: secret-named values sealed.
    assert b"sk-canary" not in text and LARGE["doc"].encode() in text


async def test_a_call_whose_state_a_callback_changed_gets_a_snapshot_of_its_own(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    publisher = CeleryPublisher(fake_redis)  # type: ignore[arg-type]
    states = TurnStates(publisher, KEYS, lambda: 60)
    first, second = make_call("c1", dict(LARGE)), make_call("c2", {**LARGE, "step": 2})

    assert states.of(first) != states.of(second)
    assert states.of(first) == states.of(make_call("c3", dict(LARGE)))


def read_doc(tool_context: Any) -> dict[str, Any]:
    """What the worker runs: it reads the state."""
    return {"length": len(tool_context.state["doc"])}


def worker(client: fakeredis.FakeRedis, loader: SnapshotLoader | None = None) -> ToolRuns:
    """A worker's runs of `read_doc`, loading snapshots from `client` (with `loader`)."""
    deps = replace(guarded_deps(client, SETTINGS), snapshots=loader or SnapshotLoader(client, KEYS))
    return ToolRuns(LocalTool(read_doc), deps, 60.0, "io")


@pytest.fixture
def client() -> fakeredis.FakeRedis:
    client = fakeredis.FakeRedis()
    for script in (COUNT, POST):
        client.script_load(script.text)
    return client


def with_snapshot(client: fakeredis.FakeRedis, state: dict[str, Any]) -> ToolCall:
    """A call naming a snapshot of `state`, stored as the orchestrator stores it."""
    text = json.dumps(state).encode()
    client.set(KEYS.state_snapshot(S, digest_of(text)), text)
    return make_call("c1", {}).model_copy(update={"state_ref": digest_of(text)})


def request() -> SimpleNamespace:
    """What the intake reads of a message for admitting its call."""
    return SimpleNamespace(id="task", retries=0, hostname="io@host")


def posted(client: fakeredis.FakeRedis) -> list[ToolResult]:
    return [
        ToolResult.model_validate_json(fields[RESULT_FIELD.encode()])
        for _, fields in client.xrange(STREAM)
    ]


def test_the_worker_runs_the_tool_with_the_state_the_call_names(
    client: fakeredis.FakeRedis,
) -> None:
    call = with_snapshot(client, {"doc": "y" * 5000})
    ((admitted, error),) = ToolRuns.admit_all(
        [(worker(client), request(), call.model_dump(), None)]
    )

    assert error is None and admitted is not None
    assert admitted.envelope.state == {"doc": "y" * 5000} and admitted.envelope.state_ref is None


@pytest.mark.parametrize("as_text", [True, False])
def test_the_calls_of_a_turn_read_their_snapshot_once_and_each_gets_its_own_copy(
    client: fakeredis.FakeRedis, as_text: bool
) -> None:
    call = with_snapshot(client, {"doc": "y" * 5000, "seen": []})
    loader = SnapshotLoader(client, KEYS)
    first = loader.load(call)
    client.delete(KEYS.state_snapshot(S, call.state_ref or ""))  # a second read would miss

    runs = worker(client, loader)
    # As text (the JSON names no sealed value: nothing is walked to open one) or a dict.
    sent = call.model_dump_json() if as_text else call.model_dump()
    admissions = ToolRuns.admit_all([(runs, request(), sent, None)] * 2)
    envelopes = [admitted.envelope for admitted, _ in admissions if admitted is not None]
    assert first is not None and not first.may_hold_sealed and len(envelopes) == 2
    envelopes[0].state["seen"].append("changed by the first call's tool")
    assert envelopes[1].state["seen"] == [] and first.values["seen"] == []
    assert (loader.load(call) or first).values["seen"] == []  # the kept text is untouched


@pytest.mark.parametrize("stored", ["gone", "changed"])
def test_a_call_whose_snapshot_is_gone_or_changed_is_answered_and_not_run(
    client: fakeredis.FakeRedis, stored: str
) -> None:
    call = with_snapshot(client, {"doc": "y" * 5000})
    key = KEYS.state_snapshot(S, call.state_ref or "")
    if stored == "gone":
        client.delete(key)
    else:  # not the state the (signed) envelope names
        client.set(key, json.dumps({"doc": "forged"}))

    ((admitted, error),) = ToolRuns.admit_all(
        [(worker(client), request(), call.model_dump(), None)]
    )

    assert admitted is None and error is None
    (answer,) = posted(client)
    assert answer.status is CallStatus.ERROR and answer.call_id == "c1"
    assert answer.response["error_type"] == "StateUnavailable"
    assert "did not run" in answer.response["error_message"]


def test_a_call_answered_already_whose_snapshot_is_gone_is_dropped_without_a_word(
    client: fakeredis.FakeRedis, caplog: pytest.LogCaptureFixture
) -> None:
    call = with_snapshot(client, {"doc": "y" * 5000})
    client.delete(KEYS.state_snapshot(S, call.state_ref or ""))
    client.set(KEYS.closed(S, "c1"), 1)  # timed out waiting: the model was told

    ((admitted, error),) = ToolRuns.admit_all(
        [(worker(client), request(), call.model_dump(), None)]
    )

    assert admitted is None and error is None and posted(client) == []
    assert "was answered before it started" in caplog.text


def test_a_sealed_secret_in_a_snapshot_is_opened_for_the_tool_though_the_message_names_none(
    client: fakeredis.FakeRedis,
) -> None:
    sealer = Sealer(new_fleet_key(), SETTINGS.secret_arg_names)
    publisher = CeleryPublisher(None, SETTINGS.secret_arg_names, sealer)  # type: ignore[arg-type]
    text = publisher.sealed_state(LARGE)
    assert b"sk-canary" not in text
    client.set(KEYS.state_snapshot(S, digest_of(text)), text)
    call = make_call("c1", {}).model_copy(update={"state_ref": digest_of(text)})
    runs = ToolRuns(LocalTool(read_doc), replace(worker(client)._deps, sealer=sealer), 60.0, "io")
    ((admitted, error),) = ToolRuns.admit_all([(runs, request(), call.model_dump_json(), None)])
    assert error is None and admitted is not None
    assert admitted.envelope.state == LARGE


@pytest.mark.parametrize("key", ['"$sealed"', '"\\u0024sealed"', '"$seal\\u0065d"'])
@pytest.mark.parametrize("where", ["message", "snapshot"])
def test_a_sealed_value_without_a_fleet_key_is_refused_however_its_key_is_spelled(
    client: fakeredis.FakeRedis, key: str, where: str
) -> None:
    sealed = '{"api_key": {' + key + ': "token"}}'
    if where == "snapshot":
        text = ('{"doc": "' + "x" * 2000 + '", "user:creds": ' + sealed + "}").encode()
        client.set(KEYS.state_snapshot(S, digest_of(text)), text)
        call = make_call("c1", {}).model_copy(update={"state_ref": digest_of(text)})
        sent = call.model_dump_json()
    else:
        sent = make_call("c1", {}).model_dump_json().replace('"args":{}', '"args":' + sealed)
    ((admitted, error),) = ToolRuns.admit_all([(worker(client), request(), sent, None)])
    assert admitted is None and error is None
    (refused,) = posted(client)
    assert refused.response["error_type"] == "SealedArgumentError"
