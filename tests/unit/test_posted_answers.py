"""How much of a posted answer is taken and kept: a result or confirmation payload over
TOOLFLEET_MAX_PAYLOAD_BYTES is refused on every path (dead-lettered without it), and
where any caller may post (the HTTP API's client) a refused post keeps only a small
response."""

from __future__ import annotations

import json
import time
from typing import Any

import fakeredis
import pytest

from toolfleet.shared.completions import KEPT_REFUSED_BYTES, NOT_KEPT, Completions
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import CallNotPendingError, PayloadTooLargeError
from toolfleet.shared.keys import Keys
from toolfleet.shared.messages import PendingCall

KEYS = Keys("t")
LIMIT = 2048


def register(completions: Completions, call_id: str, kind: str = "result", **fields: Any) -> str:
    completions.register(
        PendingCall(
            call_id=call_id, tool="t", session_id="s", app_name="app", user_id="u", agent="a",
            invocation_id="i", ticket={}, created_at=time.time(), kind=kind,  # type: ignore[arg-type]
            **fields,
        )
    )  # fmt: skip
    return call_id


def dead_letters(client: fakeredis.FakeRedis) -> list[tuple[str, dict[str, Any]]]:
    entries: Any = client.xrange(KEYS.dead_letters())
    return [(f[b"reason"].decode(), json.loads(f[b"completion"])) for _, f in entries]


def posted(client: fakeredis.FakeRedis) -> int:
    return int(client.xlen(KEYS.completions("app")))


def test_a_result_or_payload_over_the_size_limit_is_refused_and_kept_without_it() -> None:
    client = fakeredis.FakeRedis()
    completions = Completions(client, KEYS, max_payload_bytes=LIMIT)
    result = register(completions, "c1")
    asked = register(completions, "c2", kind="confirmation")
    big = {"blob": "x" * LIMIT}

    with pytest.raises(PayloadTooLargeError, match=r"over the 2048-byte limit.*MAX_PAYLOAD"):
        completions.post_result(result, big, source="http")
    with pytest.raises(PayloadTooLargeError, match="the payload is"):
        completions.confirm(asked, True, payload=big)
    assert posted(client) == 0  # nothing posted; both still wait
    assert completions.get(result) and completions.get(asked)
    kept = dead_letters(client)
    assert [c["call_id"] for _, c in kept] == [result, asked]
    assert all("x" * 100 not in json.dumps(c) for _, c in kept)  # the value is not kept

    completions.post_result(result, {"blob": "x" * (LIMIT - 20)})  # under it: posted
    assert posted(client) == 1


def test_the_settings_limit_holds_for_every_client_made_from_them() -> None:
    settings = Settings(redis_url="redis://127.0.0.1:1/0", max_payload_bytes=4096)
    completions = Completions.of(fakeredis.FakeRedis(), KEYS, settings)
    assert completions.max_payload_bytes == 4096


def test_where_anyone_may_post_a_refused_post_keeps_only_a_small_response() -> None:
    client = fakeredis.FakeRedis()
    open_to_anyone = Completions(client, KEYS, kept_refused_bytes=KEPT_REFUSED_BYTES)
    large = {"blob": "x" * (KEPT_REFUSED_BYTES + 1)}
    small = {"status": "approved"}
    for response in (large, small):
        with pytest.raises(CallNotPendingError):
            open_to_anyone.post_result("no-such-call", response)
    (_, cut), (_, whole) = dead_letters(client)
    size = len(json.dumps(large, separators=(",", ":")))
    assert cut["response"] == {NOT_KEPT: f"{size} bytes of JSON"}
    assert whole["response"] == small
    # The operator's own client (the CLI, Python) keeps what it refused whole.
    with pytest.raises(CallNotPendingError):
        Completions(client, KEYS).post_result("no-such-call", large)
    assert dead_letters(client)[-1][1]["response"] == large
