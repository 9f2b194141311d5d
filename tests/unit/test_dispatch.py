"""The Celery message the orchestrator writes straight onto a pool's Redis list."""

from __future__ import annotations

import base64
import json
import time

from toolfleet.orchestrator.fleet.dispatch import CeleryPublisher
from toolfleet.shared.call_signing import CallSigner, read_call
from toolfleet.shared.messages import ToolCall
from toolfleet.shared.sealing import Sealer
from toolfleet.shared.signing import new_fleet_key


def make_call(args: dict[str, object]) -> ToolCall:
    return ToolCall(
        call_id="c1", tool="call_api", args=args, session_id="s", app_name="a", user_id="u",
        invocation_id="i", agent="a", state={"user:token_cache": "x"}, reply_to="r",
        dispatched_at=time.time(),
    )  # fmt: skip


def test_message_is_a_celery_protocol_2_task_with_the_envelope_as_kwarg(fake_redis: object) -> None:
    publisher = CeleryPublisher(fake_redis, ["api_key"])  # type: ignore[arg-type]
    call = make_call({"endpoint": "/v1/x", "api_key": "sk-canary"})
    message = json.loads(publisher.encode(publisher.dispatch(call, "tools.default")))

    assert message["headers"]["task"] == "tool.call_api"
    assert message["content-type"] == "application/json"
    assert message["properties"]["delivery_info"]["routing_key"] == "tools.default"
    args, kwargs, _embed = json.loads(base64.b64decode(message["body"]))
    # The envelope as JSON text; unsigned without a fleet key.
    assert args == [] and set(kwargs) == {"call"}
    assert ToolCall.model_validate_json(kwargs["call"]) == call
    # What Flower shows: the arguments with secrets masked, never the state snapshot.
    shown = message["headers"]["argsrepr"] + message["headers"]["kwargsrepr"]
    assert "sk-canary" not in shown and "'api_key': '***'" in shown
    assert "/v1/x" in shown and "token_cache" not in shown


async def test_publish_pushes_each_message_on_its_queue(fake_redis: object) -> None:
    publisher = CeleryPublisher(fake_redis)  # type: ignore[arg-type]
    await publisher.publish(
        [
            publisher.dispatch(make_call({"n": 1}), "tools.default"),
            publisher.dispatch(make_call({"n": 2}), "tools.heavy"),
        ],
        record_in="sent",
    )
    assert await fake_redis.llen("tools.default") == 1  # type: ignore[attr-defined]
    assert await fake_redis.llen("tools.heavy") == 1  # type: ignore[attr-defined]
    # What a replica taking over the turn must not send again (both calls have id c1).
    assert await fake_redis.smembers("sent") == {b"c1"}  # type: ignore[attr-defined]


def test_with_a_fleet_key_the_sealed_envelope_is_signed_as_sent(fake_redis: object) -> None:
    key = new_fleet_key()
    signer = CallSigner.of(key)
    sealer = Sealer(key, ["api_key"])
    publisher = CeleryPublisher(fake_redis, ["api_key"], sealer, signer=signer)  # type: ignore[arg-type]
    call = make_call({"endpoint": "/v1/x", "api_key": "sk-canary"})
    message = json.loads(publisher.encode(publisher.dispatch(call, "tools.default")))

    _, kwargs, _ = json.loads(base64.b64decode(message["body"]))
    assert set(kwargs) == {"call", "sig"} and "sk-canary" not in kwargs["call"]
    assert signer is not None and signer.valid(kwargs["call"].encode(), kwargs["sig"])
    assert read_call("tool.call_api", kwargs["call"], kwargs["sig"], signer).call_id == "c1"
    # Flower's view is what it was: masked arguments, no signature, no state.
    shown = message["headers"]["argsrepr"] + message["headers"]["kwargsrepr"]
    assert "'api_key': '***'" in shown and "sig" not in shown and "token_cache" not in shown
