"""Masking at any depth (redact_deep) and sealing secrets for the workers (shared.sealing)."""

from __future__ import annotations

import base64
import json
import time

import fakeredis
import pytest
from pydantic_core import to_json

from toolfleet.orchestrator.fleet.dispatch import CeleryPublisher
from toolfleet.orchestrator.loop.turn import responses_event
from toolfleet.shared.keys import Keys
from toolfleet.shared.messages import CallStatus, PendingCall, ToolCall, ToolResult
from toolfleet.shared.pending import PendingCalls
from toolfleet.shared.redaction import MASK, SEALED, mentions_sealed, redact_deep
from toolfleet.shared.reporting import ResultReporter
from toolfleet.shared.sealing import Sealer, SealError, may_hold_sealed, unseal
from toolfleet.shared.signing import new_fleet_key
from toolfleet.workers.tool_runs import unsealed

NAMES = ["api_key", "password", "token", "secret"]
ARGS = {
    "auth": {"API_KEY": "CLEAR-K1"}, "password": "CLEAR-P1", "items": [{"token": "CLEAR-T1"}],
    "note": "n",
}  # fmt: skip


def make_call(args: dict[str, object]) -> ToolCall:
    return ToolCall(
        call_id="c1", tool="use", args=args, session_id="s", app_name="a", user_id="u",
        invocation_id="i", agent="a", state={"secret": "CLEAR-S1", "colour": "red"}, reply_to="r",
        dispatched_at=time.time(),
    )  # fmt: skip


def make_result(response: dict[str, object]) -> ToolResult:
    return ToolResult(
        call_id="c1", tool="use", session_id="s", invocation_id="i",
        status=CallStatus.SUCCESS, response=response,
    )  # fmt: skip


def test_redact_deep_masks_secret_names_at_any_depth_case_insensitively() -> None:
    masked = redact_deep(ARGS, NAMES)
    assert masked == {
        "auth": {"API_KEY": MASK}, "password": MASK, "items": [{"token": MASK}], "note": "n",
    }  # fmt: skip
    assert ARGS["password"] == "CLEAR-P1"  # a copy: the original is untouched
    clean = {"note": "n", "nested": [{"a": 1}]}
    assert redact_deep(clean, NAMES) is clean  # nothing to mask: the value itself


def test_redact_deep_keeps_sealed_values_only_when_asked() -> None:
    value = {"auth": {"api_key": {SEALED: "gAAAA"}}, "password": "CLEAR-P1"}
    assert redact_deep(value, NAMES) == {"auth": {"api_key": MASK}, "password": MASK}
    kept = redact_deep(value, NAMES, keep_sealed=True)
    assert kept == {"auth": {"api_key": {SEALED: "gAAAA"}}, "password": MASK}
    sealed_only = {"auth": {"api_key": {SEALED: "gAAAA"}}}
    assert redact_deep(sealed_only, NAMES, keep_sealed=True) is sealed_only


def test_seal_hides_every_secret_value_and_unseal_restores_them() -> None:
    sealer = Sealer(new_fleet_key(), NAMES)
    sealed = sealer.seal(ARGS)
    text = json.dumps(sealed)
    assert "CLEAR-K1" not in text and "CLEAR-P1" not in text and "CLEAR-T1" not in text
    assert set(sealed["auth"]["API_KEY"]) == {SEALED} and sealed["note"] == "n"
    assert sealer.seal(sealed) == sealed  # sealing twice seals nothing more
    assert sealer.unseal(sealed) == ARGS
    assert unseal(ARGS, None) == ARGS  # nothing sealed, no key needed


def test_a_sealed_value_opens_only_with_the_fleet_key_that_sealed_it() -> None:
    sealed = Sealer(new_fleet_key(), NAMES).seal(ARGS)
    with pytest.raises(SealError, match="TOOLFLEET_FLEET_KEY"):
        Sealer(new_fleet_key(), NAMES).unseal(sealed)
    with pytest.raises(SealError, match="TOOLFLEET_FLEET_KEY is not set"):
        unseal(sealed, None)
    with pytest.raises(SealError):
        Sealer(new_fleet_key(), NAMES).unseal({"token": {SEALED: "not-a-token"}})


def test_only_sealed_values_under_secret_names_are_opened_and_models_may_not_send_any() -> None:
    sealer = Sealer(new_fleet_key(), NAMES)
    stolen = sealer.seal({"api_key": "VICTIM-KEY"})["api_key"]
    # A sealed token moved under another name (to have a tool echo it back) stays sealed.
    assert sealer.unseal({"query": stolen}) == {"query": stolen}
    assert sealer.unseal({"api_key": stolen}) == {"api_key": "VICTIM-KEY"}
    # The orchestrator refuses model arguments that carry the reserved key at all.
    assert mentions_sealed({"q": [{"auth": {SEALED: "x"}}]})
    assert not mentions_sealed({"q": [{"auth": {"api_key": "x"}}]})


def test_the_task_message_carries_secrets_sealed_and_the_worker_opens_them() -> None:
    sealer = Sealer(new_fleet_key(), NAMES)
    publisher = CeleryPublisher(None, NAMES, sealer)  # type: ignore[arg-type]
    call = make_call(ARGS)
    message = publisher.encode(publisher.dispatch(call, "tools.default"))
    _, kwargs, _ = json.loads(base64.b64decode(json.loads(message)["body"]))
    for clear in ("CLEAR-K1", "CLEAR-P1", "CLEAR-T1", "CLEAR-S1"):
        assert clear not in message and clear not in json.dumps(kwargs)
    argsrepr = json.loads(message)["headers"]["argsrepr"]
    assert "'auth': {'API_KEY': '***'}" in argsrepr
    sent = ToolCall.model_validate_json(kwargs["call"])
    opened = unsealed(sent, sealer, NAMES)
    assert opened.args == ARGS and opened.state == call.state
    with pytest.raises(SealError):
        unsealed(sent, Sealer(new_fleet_key(), NAMES), NAMES)


@pytest.mark.parametrize(
    ("value", "may"),
    [
        ({"note": "n", "items": [1, {"colour": "red"}]}, False),  # no secret name anywhere
        ({"outer": [{"inner": {"Api_Key": "k"}}]}, True),  # at depth, any case
        ({"user:token": "t"}, True),  # a scoped state key
        ({"\u212aEY": 1, "api_\u212aey": "k"}, True),  # KELVIN SIGN lowers to "k"
        ({"note": "my password is not a key"}, True),  # in a value: walked, to be sure
    ],
)
def test_may_seal_is_false_only_where_no_secret_name_appears(value: object, may: bool) -> None:
    sealer = Sealer(new_fleet_key(), NAMES)
    assert sealer.may_seal(to_json(value)) is may
    if not may:
        assert sealer.seal(value) == value


def test_a_secret_name_json_would_escape_is_always_walked_for() -> None:
    sealer = Sealer(new_fleet_key(), ['we"ird'])
    assert sealer.may_seal(b'{"note": "n"}')


def test_a_call_without_secrets_is_sent_as_it_is_and_one_with_them_sealed() -> None:
    sealer = Sealer(new_fleet_key(), NAMES)
    publisher = CeleryPublisher(None, NAMES, sealer)  # type: ignore[arg-type]
    plain = make_call({"note": "n"}).model_copy(update={"state": {"colour": "red"}})
    sent = ToolCall.model_validate_json(publisher.dispatch(plain, "tools.default").kwargs["call"])
    assert sent == plain
    secret = make_call({"note": "n"})  # its state holds "secret"
    sent = ToolCall.model_validate_json(publisher.dispatch(secret, "tools.default").kwargs["call"])
    assert sent.state["colour"] == "red" and SEALED in sent.state["secret"]


def test_results_are_sealed_on_the_stream_and_opened_for_the_model() -> None:
    sealer = Sealer(new_fleet_key(), NAMES)
    client = fakeredis.FakeRedis()
    ResultReporter(client, 100, sealer=sealer).post("results", make_result({"token": "CLEAR-T1"}))
    ((_, fields),) = client.xrange("results")
    assert b"CLEAR-T1" not in b"".join(fields.values())
    posted = ToolResult.model_validate_json(fields[b"result"])
    (part,) = responses_event("i", "a", [posted], sealer).content.parts  # type: ignore[union-attr, misc]
    assert part.function_response.response == {"token": "CLEAR-T1"}  # type: ignore[union-attr]
    (wrong,) = responses_event("i", "a", [posted], Sealer(new_fleet_key(), NAMES)).content.parts  # type: ignore[union-attr, misc]
    assert wrong.function_response.response["error_type"] == "SealedResultError"  # type: ignore[union-attr, index]


def test_a_sealed_token_a_tool_relays_in_its_result_is_not_opened_for_the_model() -> None:
    sealer = Sealer(new_fleet_key(), NAMES)
    stolen = sealer.seal({"token": "VICTIM-TOKEN"})["token"]  # read from Redis elsewhere
    client = fakeredis.FakeRedis()
    ResultReporter(client, 100, sealer=sealer).post("results", make_result({"token": stolen}))
    ((_, fields),) = client.xrange("results")
    posted = ToolResult.model_validate_json(fields[b"result"])
    (part,) = responses_event("i", "a", [posted], sealer).content.parts  # type: ignore[union-attr, misc]
    assert part.function_response.response == {"token": stolen}  # type: ignore[union-attr]


def test_pending_records_keep_secrets_masked_or_sealed_never_in_clear() -> None:
    sealer = Sealer(new_fleet_key(), NAMES)
    pending = PendingCall.starting(make_call(ARGS), {"status": "pending", "token": "t9"})
    record = json.loads(PendingCalls(Keys("t"), NAMES).record(pending))
    assert record["args"] == redact_deep(ARGS, NAMES) and record["ticket"]["token"] == MASK
    sealed = pending.model_copy(update={"args": sealer.seal(ARGS)})
    kept = json.loads(PendingCalls(Keys("t"), NAMES).record(sealed))
    assert sealer.unseal(kept["args"]) == ARGS  # a credential request's call is sent again


@pytest.mark.parametrize(
    ("text", "may"),
    [
        ('{"note": "n", "items": [1, {"colour": "red"}]}', False),
        ('{"api_key": {"$sealed": "t"}}', True),
        ('{"api_key": {"\\u0024sealed": "t"}}', True),  # the key behind an escape
        ('{"note": "caf\\u00e9"}', True),  # any \u escape: walked, to be sure
        ('{"note": "a \\"quoted\\" word\\n"}', False),  # other escapes cannot spell it
    ],
)
def test_may_hold_sealed_is_false_only_where_no_sealed_key_can_be(text: str, may: bool) -> None:
    assert may_hold_sealed(text) is may
    assert may_hold_sealed(text.encode()) is may
    if not may:
        assert unseal(json.loads(text), None, NAMES) == json.loads(text)


# `api_key` and `APIKEY` in fullwidth letters.
FULLWIDTH_LOWER = "".join(chr(ord(c) + 0xFEE0) for c in "api_key")
FULLWIDTH_UPPER = "".join(chr(ord(c) + 0xFEE0) for c in "APIKEY")
# One secret name spelled as an API, a header or a wide-character keyboard would.
SPELLINGS = ["API_KEY", "apiKey", "ApiKey", "api-key", "Api-Key", FULLWIDTH_LOWER, FULLWIDTH_UPPER]


@pytest.mark.parametrize("key", SPELLINGS)
def test_a_secret_name_in_any_spelling_is_masked_sealed_and_opened(key: str) -> None:
    value = {"outer": [{key: "CLEAR-K"}], f"user:{key}": "CLEAR-U", "max_tokens": 5}
    assert redact_deep(value, ["api_key", "token"]) == {
        "outer": [{key: MASK}],
        f"user:{key}": MASK,
        "max_tokens": 5,
    }
    sealer = Sealer(new_fleet_key(), ["api_key"])
    text = to_json(value)
    assert sealer.may_seal(text)  # the prefilter lets it through to be walked
    sealed = sealer.seal(value)
    assert b"CLEAR-" not in to_json(sealed)
    assert sealer.unseal(sealed) == value


def test_names_that_only_contain_a_secret_name_are_not_secret() -> None:
    value = {"max_tokens": 5, "token_count": 2, "api": "x", "keys": [1], "passwords_set": 1}
    assert redact_deep(value, ["api_key", "token", "password"]) is value
