"""A message's FunctionResponse parts posted as completions of the session's pending calls:
a long-running call's result (final unless it says more follow) or a person's answer to
`adk_request_confirmation`, each through the apply-once path of tickets."""

from __future__ import annotations

import asyncio

from google.genai import types

from toolfleet.orchestrator.adkwire.confirming import confirmation_answer
from toolfleet.orchestrator.adkwire.credentials import credential_answer
from toolfleet.shared.auth import CredentialStore
from toolfleet.shared.completions import Completions
from toolfleet.shared.confirmation import SERVED_AGENT
from toolfleet.shared.errors import CallNotPendingError, CompletionError
from toolfleet.shared.keys import SessionKey

SOURCE = "adk-message"  # the completion's source, as `toolfleet tickets show` lists it


async def post_responses(
    completions: Completions,
    session: SessionKey,
    responses: list[types.FunctionResponse],
    credentials: CredentialStore,
) -> list[tuple[str, str]]:
    """Post each response for its call of `session`, as ADK's client sends it: final unless
    it says more follow (`will_continue`); a response to `adk_request_confirmation` is the
    person's answer, one to `adk_request_credential` the user's credential (stored in
    `credentials`, the call then runs again). Returns each call's id and its completion's
    stream entry, in order.

    Raises:
        CallNotPendingError: A response answers no call pending in this session.
        CompletionError: A response is refused (kept as a dead letter).
        ValueError: A confirmation's or credential's response does not carry the id of its
            request, or a credential's carries no credential."""
    posted = []
    for response in responses:
        await asyncio.to_thread(_check_pending_here, completions, session, response)
        confirming = confirmation_answer(response)
        credential = credential_answer(response)
        if confirming is not None:  # a person's answer to adk_request_confirmation
            call_id, confirmed, payload = confirming
            entry_id = await asyncio.to_thread(
                completions.confirm, call_id, confirmed, payload=payload, source=SOURCE
            )
        elif credential is not None:  # the user's credential, for adk_request_credential
            call_id, secret = credential
            entry_id = await asyncio.to_thread(
                completions.supply_credential, call_id, secret, credentials, source=SOURCE
            )
        else:
            call_id = response.id or ""
            entry_id = await asyncio.to_thread(
                completions.post_result,
                call_id,
                dict(response.response or {}),
                final=not response.will_continue,
                source=SOURCE,
            )
        posted.append((call_id, entry_id))
    return posted


def _check_pending_here(
    completions: Completions, session: SessionKey, response: types.FunctionResponse
) -> None:
    """CallNotPendingError, as for a call that does not exist, when the call `response`
    answers is pending in another session (another user's, whatever its id). A call not
    pending at all is left to the post, which refuses it and keeps it as a dead letter."""
    answered = confirmation_answer(response) or credential_answer(response)
    call_id = answered[0] if answered is not None else response.id or ""
    try:
        call = completions.get(call_id)
    except CompletionError:
        return
    # A call made through `toolfleet mcp serve` is no session's, whatever its ids say.
    if call.session_key != session or call.agent == SERVED_AGENT:
        raise CallNotPendingError(
            f"no pending call with id {call_id!r}; see `toolfleet tickets list`"
        )
