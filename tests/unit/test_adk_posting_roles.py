"""An ADK message's function responses answer only calls of its session, and each is
allowed by its caller's roles before any of them is posted."""

from __future__ import annotations

import json
from typing import Any

import fakeredis
import pytest
from google.genai import types

from tests.unit.test_posted_answers import KEYS, posted, register
from toolfleet.orchestrator.adkwire.posting import Answer, post_responses
from toolfleet.shared.auth import CredentialStore
from toolfleet.shared.completions import Completions
from toolfleet.shared.errors import AlreadyCompletedError, CallNotPendingError
from toolfleet.shared.keys import session_key
from toolfleet.shared.messages import PendingCall

SESSION = session_key("app", "u", "s")


class Refused(Exception):
    pass


def result_of(call_id: str, **response: Any) -> types.FunctionResponse:
    return types.FunctionResponse(id=call_id, name="t", response=response)


async def test_every_response_of_a_message_is_allowed_before_any_is_posted() -> None:
    client = fakeredis.FakeRedis()
    completions = Completions(client, KEYS)
    credentials = CredentialStore(client, KEYS, None)
    mine = register(completions, "c-mine", answered_by_user=True)
    approval = register(completions, "c-approval")
    asked: list[tuple[str, Answer]] = []

    def authorize(call: PendingCall, answer: Answer) -> None:
        asked.append((call.call_id, answer))
        if not call.answered_by_user:
            raise Refused(call.call_id)

    responses = [result_of(mine, choice="a"), result_of(approval, status="approved")]
    with pytest.raises(Refused, match=approval):
        await post_responses(completions, SESSION, responses, credentials, authorize=authorize)
    assert posted(client) == 0  # the first was allowed, and still not posted
    assert asked == [(mine, "result"), (approval, "result")]

    got = await post_responses(completions, SESSION, responses[:1], credentials, authorize)
    assert [call_id for call_id, _ in got] == [mine] and posted(client) == 1


async def test_a_response_of_another_kind_or_session_is_left_to_its_refusal() -> None:
    client = fakeredis.FakeRedis()
    completions = Completions(client, KEYS)
    credentials = CredentialStore(client, KEYS, None)
    waits_for_yes = register(completions, "c-confirm", kind="confirmation")
    asked: list[str] = []

    def authorize(call: PendingCall, answer: Answer) -> None:
        asked.append(call.call_id)

    # A result for a call that waits for a person's yes: refused by the post, which says
    # why (409 over HTTP), not asked about as a result.
    with pytest.raises(Exception, match="confirmation"):
        await post_responses(
            completions, SESSION, [result_of(waits_for_yes)], credentials, authorize
        )
    assert asked == [] and posted(client) == 0
    # Another session's call is not pending here, whoever asks.
    elsewhere = session_key("app", "u", "other")
    with pytest.raises(CallNotPendingError):
        await post_responses(completions, elsewhere, [result_of(waits_for_yes)], credentials)


class OpenedAfterTheCheck(Completions):
    """The call's ticket opens between the message's check and its post: the check
    finds it not pending, the post finds it pending."""

    def __init__(self, client: fakeredis.FakeRedis, call: str) -> None:
        super().__init__(client, KEYS)
        self._call = call
        self.opened = False

    def get(self, call_id: str) -> PendingCall:
        if call_id == self._call and not self.opened:
            self.opened = True
            raise CallNotPendingError(f"no pending call with id {call_id!r}")
        return super().get(call_id)


async def test_a_call_pending_only_once_checked_is_allowed_on_the_record_it_is_posted_for() -> None:
    # Given an approval whose ticket opens after the message was checked
    client = fakeredis.FakeRedis()
    completions = OpenedAfterTheCheck(client, "c-approval")
    approval = register(completions, "c-approval")
    credentials = CredentialStore(client, KEYS, None)

    def authorize(call: PendingCall, answer: Answer) -> None:
        raise Refused(call.call_id)  # a user may not post an approval's result

    # When its user posts the result, it is refused on the record the post read
    with pytest.raises(Refused, match=approval):
        await post_responses(
            completions, SESSION, [result_of(approval, status="approved")], credentials, authorize
        )
    assert completions.opened and posted(client) == 0


async def test_a_call_answered_in_another_session_is_not_told_about_there() -> None:
    client = fakeredis.FakeRedis()
    completions = Completions(client, KEYS)
    credentials = CredentialStore(client, KEYS, None)
    elsewhere = session_key("app", "alice", "s")
    claim = {"entry": "1-0", "session": elsewhere, "at": 1.0, "answer": "rejected"}
    client.set(KEYS.applied("c-hers"), json.dumps(claim))
    # Her call, answered: to another session's message it is a call that does not exist.
    with pytest.raises(CallNotPendingError) as caught:
        await post_responses(completions, SESSION, [result_of("c-hers")], credentials)
    assert "rejected" not in str(caught.value) and "no pending call" in str(caught.value)
    assert posted(client) == 0
    # To her own session's, the post says what answered it.
    with pytest.raises(AlreadyCompletedError, match="rejected"):
        await post_responses(completions, elsewhere, [result_of("c-hers")], credentials)
