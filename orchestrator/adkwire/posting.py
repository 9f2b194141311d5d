"""A message's FunctionResponse parts posted as completions of the session's pending calls:
a long-running call's result (final unless it says more follow) or a person's answer to
`adk_request_confirmation`, each through the apply-once path of tickets."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Literal

from google.genai import types

from toolfleet.orchestrator.adkwire.confirming import confirmation_answer
from toolfleet.orchestrator.adkwire.credentials import credential_answer
from toolfleet.shared.auth import CredentialStore
from toolfleet.shared.completions import Completions, PendingCheck
from toolfleet.shared.confirmation import SERVED_AGENT
from toolfleet.shared.errors import CallNotPendingError, CompletionError
from toolfleet.shared.keys import SessionKey
from toolfleet.shared.messages import PendingCall

SOURCE = "adk-message"  # the completion's source, as `toolfleet tickets show` lists it

# What a response answers: a long-running call's result, a person's confirmation, or the
# user's credential - as a pending call's `kind` names what it waits for.
Answer = Literal["result", "confirmation", "credential"]
# Decides whether a response may answer its pending call; raises to refuse it.
Authorize = Callable[[PendingCall, Answer], None]


async def post_responses(
    completions: Completions,
    session: SessionKey,
    responses: list[types.FunctionResponse],
    credentials: CredentialStore,
    authorize: Authorize | None = None,
    before_posting: Callable[[], Awaitable[None]] | None = None,
) -> list[tuple[str, str]]:
    """Post each response for its call of `session`, as ADK's client sends it: final unless
    it says more follow (`will_continue`); a response to `adk_request_confirmation` is the
    person's answer, one to `adk_request_credential` the user's credential (stored in
    `credentials`, the call then runs again). Returns each call's id and its completion's
    stream entry, in order.

    Every response is checked before any is posted: its call is this session's, and
    `authorize` (the HTTP caller's roles; None: a program's own Runner, which may answer
    anything of its sessions) lets it answer the call it waits for the way it does.
    `before_posting` runs once they all passed, before the first is posted (the state
    the message writes: a message refused writes nothing).

    Raises:
        CallNotPendingError: A response answers no call pending in this session.
        CompletionError: A response is refused (kept as a dead letter).
        ValueError: A confirmation's or credential's response does not carry the id of its
            request, or a credential's carries no credential key or no credential.
        Exception: What `authorize` raised, nothing posted."""
    for response in responses:
        await asyncio.to_thread(_check_answerable, completions, session, response, authorize)
    if before_posting is not None:
        await before_posting()
    posted = []
    for response in responses:
        # Checked again on the record each post reads: the call may have become pending
        # (its ticket opened) or changed since the check above.
        check = _checker(session, _answers(response)[0], authorize)
        confirming = confirmation_answer(response)
        credential = credential_answer(response)
        if confirming is not None:  # a person's answer to adk_request_confirmation
            call_id = confirming.call_id
            # Taken only for the question it answers: one asked since refuses it.
            entry_id = await asyncio.to_thread(
                completions.confirm, call_id, confirming.confirmed, payload=confirming.payload,
                source=SOURCE, check=check, asked=confirming.asked,
            )  # fmt: skip
        elif credential is not None:  # the user's credential, for adk_request_credential
            call_id = credential.call_id
            # Stored only for the request it answers (its call's id and credential key).
            entry_id = await asyncio.to_thread(
                completions.supply_credential, call_id, credential.secret, credentials,
                source=SOURCE, check=check, asked=credential.asked,
                credential_key=credential.credential_key,
            )  # fmt: skip
        else:
            call_id = response.id or ""
            entry_id = await asyncio.to_thread(
                completions.post_result,
                call_id,
                dict(response.response or {}),
                final=not response.will_continue,
                source=SOURCE,
                check=check,
            )
        posted.append((call_id, entry_id))
    return posted


def is_final(response: types.FunctionResponse) -> bool:
    """Whether `response` answers its call for good: a result unless it says more follow
    (`will_continue`: the call stays pending); a confirmation or a credential always."""
    return _answers(response)[0] != "result" or not response.will_continue


def _check_answerable(
    completions: Completions,
    session: SessionKey,
    response: types.FunctionResponse,
    authorize: Authorize | None,
) -> None:
    """CallNotPendingError, as for a call that does not exist, when the call `response`
    answers is pending in another session (another user's, whatever its id), or was
    answered there (what answered it is that session's to know); what `authorize` raises
    when it may not answer it. A call not pending at all, or waiting for another kind of
    answer, is left to the post, which refuses it saying why and keeps it as a dead
    letter."""
    answer, call_id = _answers(response)
    try:
        call = completions.get(call_id)
    except CompletionError:
        answered_in = completions.answered_in(call_id)
        if answered_in is not None and answered_in != session:
            raise _not_here(call_id) from None
        return
    if call.kind == answer:
        _checker(session, answer, authorize)(call)
    else:
        _check_session(session, call)


def _checker(session: SessionKey, answer: Answer, authorize: Authorize | None) -> PendingCheck:
    """The check of a pending call that a response answering it the `answer` way must
    pass: the call is of `session`, and `authorize` lets it be answered so."""

    def check(call: PendingCall) -> None:
        _check_session(session, call)
        if authorize is not None:
            authorize(call, answer)

    return check


def _check_session(session: SessionKey, call: PendingCall) -> None:
    # A call made through `toolfleet mcp serve` is no session's, whatever its ids say.
    if call.session_key != session or call.agent == SERVED_AGENT:
        raise _not_here(call.call_id)


def _not_here(call_id: str) -> CallNotPendingError:
    return CallNotPendingError(f"no pending call with id {call_id!r}; see `toolfleet tickets list`")


def _answers(response: types.FunctionResponse) -> tuple[Answer, str]:
    """What `response` answers, and the id of the call it answers."""
    confirming = confirmation_answer(response)
    if confirming is not None:
        return "confirmation", confirming.call_id
    credential = credential_answer(response)
    if credential is not None:
        return "credential", credential.call_id
    return "result", response.id or ""
