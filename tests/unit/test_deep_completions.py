"""Posted results nested over TOOLFLEET_MAX_JSON_DEPTH (post_result, confirm, the
`toolfleet tickets` CLI, a completions-stream entry): refused naming the limit, measured
before anything parses or walks them, and dead-lettered without their value."""

from __future__ import annotations

import json
import time
from typing import Any

import fakeredis
import pytest

from tests.unit.test_json_depth import ABYSS, SETTING, nested, nested_text
from toolfleet.orchestrator.cli import tickets
from toolfleet.orchestrator.cli.main import main
from toolfleet.orchestrator.completions.entries import parse_entry
from toolfleet.shared.completions import Completions
from toolfleet.shared.errors import InvalidCompletionError
from toolfleet.shared.json_depth import TOO_DEEP_KEY, value_depth
from toolfleet.shared.keys import Keys
from toolfleet.shared.messages import Completion, PendingCall

KEYS = Keys("t")


def pending_call(completions: Completions, kind: str = "result") -> str:
    call_id = f"c-{kind}"
    completions.register(
        PendingCall(
            call_id=call_id, tool="t", session_id="s", app_name="app", user_id="u", agent="a",
            invocation_id="i", ticket={"hint": "ok?"}, created_at=time.time(), kind=kind,  # type: ignore[arg-type]
        )
    )  # fmt: skip
    return call_id


def dead_letters(client: fakeredis.FakeRedis) -> list[tuple[str, dict[str, Any]]]:
    entries: Any = client.xrange(KEYS.dead_letters())
    return [(f[b"reason"].decode(), json.loads(f[b"completion"])) for _, f in entries]


def test_a_posted_result_nested_too_deep_is_refused_and_dead_lettered() -> None:
    client = fakeredis.FakeRedis()
    completions = Completions(client, KEYS)
    call_id = pending_call(completions)

    with pytest.raises(InvalidCompletionError, match=f"more than 64 levels deep.*{SETTING}"):
        completions.post_result(call_id, nested(ABYSS), source="http")
    ((reason, kept),) = dead_letters(client)
    assert "the result nests" in reason and SETTING in reason
    assert kept["call_id"] == call_id and kept["source"] == "http"
    assert list(kept["response"]) == [TOO_DEEP_KEY]  # not the 3,000 levels
    assert client.xlen(KEYS.completions("app")) == 0  # nothing posted
    assert completions.get(call_id).call_id == call_id  # still pending

    completions.post_result(call_id, nested(64))  # at the limit: posted
    assert client.xlen(KEYS.completions("app")) == 1


def test_a_posted_result_json_cannot_write_is_refused_and_dead_lettered() -> None:
    """Bytes that are not UTF-8 (a job passing on what an external system returned):
    refused as a completion (what a poster catches), kept as a dead letter, and the call
    still waits."""
    client = fakeredis.FakeRedis()
    completions = Completions(client, KEYS)
    call_id = pending_call(completions)

    with pytest.raises(InvalidCompletionError, match="that JSON cannot write"):
        completions.post_result(call_id, {"raw": b"\xff\xfe\x00"}, source="job")
    ((reason, kept),) = dead_letters(client)
    assert "that JSON cannot write" in reason and kept["call_id"] == call_id
    assert client.xlen(KEYS.completions("app")) == 0
    assert completions.get(call_id).call_id == call_id

    completions.post_result(call_id, {"raw": b"text".decode()})
    assert client.xlen(KEYS.completions("app")) == 1


def test_a_confirmation_payload_nested_too_deep_is_refused_and_dead_lettered() -> None:
    client = fakeredis.FakeRedis()
    completions = Completions(client, KEYS, max_json_depth=8)
    call_id = pending_call(completions, "confirmation")

    with pytest.raises(InvalidCompletionError, match=r"the payload nests .* more than 8 levels"):
        completions.confirm(call_id, True, payload=[nested(ABYSS)])
    ((reason, kept),) = dead_letters(client)
    assert "the limit is 8" in reason and kept["kind"] == "confirmation"
    completions.confirm(call_id, True, payload=nested(8))
    assert client.xlen(KEYS.completions("app")) == 1


def test_the_cli_measures_the_text_before_parsing_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    client = fakeredis.FakeRedis()
    completions = Completions(client, KEYS)
    call_id = pending_call(completions)
    monkeypatch.setattr(tickets, "operator_completions", lambda: (completions, client))

    code = main(["tickets", "complete", call_id, "--json", nested_text(ABYSS)])
    assert code != 0
    assert "--json nests JSON objects and arrays more than 64 levels deep" in (
        capsys.readouterr().err
    )
    ((reason, kept),) = dead_letters(client)
    assert SETTING in reason and kept["source"] == "cli"
    assert client.xlen(KEYS.completions("app")) == 0


def test_a_stream_entry_is_measured_before_it_is_parsed() -> None:
    def entry(levels: int) -> bytes:
        return f'{{"call_id": "c", "posted_at": 1, "response": {nested_text(levels)}}}'.encode()

    refused = parse_entry(entry(ABYSS), 64)
    assert isinstance(refused, str)
    assert "more than 66 levels deep: the limit is 64 (TOOLFLEET_MAX_JSON_DEPTH)" in refused
    parsed = parse_entry(entry(64), 64)
    assert isinstance(parsed, Completion) and value_depth(parsed.response) == 64
    assert isinstance(parse_entry(b"{not json", 64), str)
