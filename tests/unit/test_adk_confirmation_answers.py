"""ADK's client's answer to `adk_request_confirmation` names the question it answers by
the call's id: a question asked again has an id of its own. A replayed answer to an
earlier question, one naming a question never asked, or another user's, is refused, and
nothing is posted."""

from __future__ import annotations

import json
import time
from typing import Any

import fakeredis
import pytest
from google.genai import types

from tests.unit.adk_shown import first_call_shown
from tests.unit.test_posted_answers import KEYS, posted
from toolfleet.orchestrator.adkwire.confirming import with_confirmation_calls
from toolfleet.orchestrator.adkwire.posting import post_responses
from toolfleet.orchestrator.loop.parking import confirmation_request
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.shared.auth import CredentialStore
from toolfleet.shared.auth import new_credential_key as new_fernet_key
from toolfleet.shared.completions import Completions
from toolfleet.shared.confirmation import REQUEST_CONFIRMATION
from toolfleet.shared.errors import AwaitingConfirmationError, CallNotPendingError
from toolfleet.shared.keys import session_key
from toolfleet.shared.messages import PendingCall

SESSION = session_key("app", "u", "s")
YES = {"confirmed": True}


def asking(completions: Completions, amount: int, asked_again: int = 0) -> PendingCall:
    """Call `c1` of user `u`, asking to confirm a payment of `amount` (its question
    `asked_again`)."""
    call = PendingCall(
        call_id="c1", tool="pay", session_id="s", app_name="app", user_id="u", agent="a",
        invocation_id="i", ticket={"hint": f"Pay {amount}?", "payload": {"amount": amount}},
        created_at=time.time(), kind="confirmation", asked_again=asked_again,
    )  # fmt: skip
    completions.register(call)
    return call


def shown_request(call: PendingCall) -> dict[str, Any]:
    """The `adk_request_confirmation` call ADK's client is shown for `call`'s question, as
    the event that asks it holds the question."""
    asked = confirmation_request(call.call_id, call.tool, {}, call.ticket, call.asked_again)
    return first_call_shown(
        with_confirmation_calls(
            Event(invocation_id="i", author="a", confirmation_requests=[asked])
        ),
        REQUEST_CONFIRMATION,
    )


def adk_answer(request_id: str, answer: dict[str, Any] = YES) -> types.FunctionResponse:
    """ADK's client's answer to the request `request_id`, as its dev UI sends it."""
    wrapped = {"response": json.dumps(answer)}
    return types.FunctionResponse(id=request_id, name=REQUEST_CONFIRMATION, response=wrapped)


def stores(client: fakeredis.FakeRedis) -> tuple[Completions, CredentialStore]:
    return Completions(client, KEYS), CredentialStore(client, KEYS, new_fernet_key())


def posted_questions(client: fakeredis.FakeRedis) -> list[int]:
    """The question each posted completion answers, in order."""
    entries: Any = client.xrange(KEYS.completions("app"))
    return [json.loads(fields[b"completion"])["asked_again"] for _, fields in entries]


async def test_an_adk_answer_replayed_after_the_call_asked_again_is_refused() -> None:
    client = fakeredis.FakeRedis()
    completions, credentials = stores(client)
    first = shown_request(asking(completions, 70))
    assert first["id"] == "adk-confirm-c1"  # the first question keeps its plain id
    yes_to_70 = adk_answer(first["id"])
    await post_responses(completions, SESSION, [yes_to_70], credentials)
    assert posted_questions(client) == [0]

    # The call ran and asks again, for more: the yes to 70, sent again (a client's
    # retry, a replay), answers no question it asks now.
    client.delete(KEYS.completions("app"))
    second = shown_request(asking(completions, 7000, asked_again=1))
    with pytest.raises(AwaitingConfirmationError, match="question 0, now 1"):
        await post_responses(completions, SESSION, [yes_to_70], credentials)
    assert posted(client) == 0

    # ADK's client answers the question it is shown now: posted, for that question.
    assert second["id"] == "adk-confirm-c1~1"  # a new question, with an id of its own
    await post_responses(completions, SESSION, [adk_answer(second["id"])], credentials)
    assert posted_questions(client) == [1]


# Ids of questions call c1 does not ask now (its second), and why each names none.
NOT_ASKED = [
    ("adk-confirm-c1", AwaitingConfirmationError),  # the first, answered already
    ("adk-confirm-c1~7", AwaitingConfirmationError),  # a question never asked
    ("adk-confirm-c1~2", AwaitingConfirmationError),  # one it may ask next
    # Not a number the loop writes: left in the call id, which names no call.
    ("adk-confirm-c1~01", CallNotPendingError),
    ("adk-confirm-c1~0", CallNotPendingError),
    ("adk-confirm-c1~-1", CallNotPendingError),
    ("adk-confirm-c1~1000000001", CallNotPendingError),
    ("adk-confirm-c1~1~1", CallNotPendingError),
    ("adk-confirm-c2~1", CallNotPendingError),  # another call's
]


async def test_an_adk_answer_to_a_question_not_asked_now_or_of_another_user_is_refused() -> None:
    client = fakeredis.FakeRedis()
    completions, credentials = stores(client)
    request = shown_request(asking(completions, 7000, asked_again=1))
    for request_id, refused in NOT_ASKED:
        with pytest.raises(refused):
            await post_responses(completions, SESSION, [adk_answer(request_id)], credentials)
    # The question asked now, answered from another user's session: no such call there.
    theirs = session_key("app", "mallory", "s")
    with pytest.raises(CallNotPendingError):
        await post_responses(completions, theirs, [adk_answer(request["id"])], credentials)
    assert posted(client) == 0 and completions.get("c1").asked_again == 1
