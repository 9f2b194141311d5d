"""A person's confirmation of a call before it runs (ADK's ToolConfirmation).

The wire format is ADK's: the client sees an `adk_request_confirmation` function call
whose arguments hold the original call and a ToolConfirmation, and answers it with a
function response `{"confirmed": ..., "payload": ...}`.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict

# The name of the function call that asks the client for a confirmation (ADK's).
REQUEST_CONFIRMATION = "adk_request_confirmation"
# The id of that function call: this prefix and the original call's id.
CONFIRMATION_ID_PREFIX = "adk-confirm-"
# A question asked again (`asked_again` n > 0) is a new one, as ADK gives each request
# its own id: `adk-confirm-<call id>~<n>`, so an answer to an earlier question answers
# no later one. No call id the loop makes holds a `~`.
_ASKED_AGAIN = re.compile(r"(?P<call_id>.+)~(?P<asked>[1-9][0-9]{0,8})", re.S)
# The agent named in calls made through `toolfleet mcp serve` (no agent's name: those
# are identifiers). Such a call has no person behind its user id - its caller is the
# MCP client - so only an approver of its app or an admin may confirm it.
SERVED_AGENT = "mcp serve"
# The user id, and the prefix of the session ids (then a replica's id), that those calls
# are kept under: a pseudo-session of no person's. The user id is one no HTTP path can
# name (a space) and no caller may have as its subject: its `user:` artifacts, memory
# and credentials are no caller's.
SERVED_USER = "mcp serve"
# Why a caller may not have SERVED_USER as its subject.
RESERVED_SUBJECT = (
    "that user id is the one `toolfleet mcp serve` runs its calls as, no caller's: "
    "give the caller another subject"
)
SERVED_SESSION_PREFIX = "mcp-"


def is_served_session(user_id: str, session_id: str) -> bool:
    """Whether `session_id` of `user_id` is one `toolfleet mcp serve` keeps its calls in
    (whichever app it serves)."""
    return user_id == SERVED_USER and session_id.startswith(SERVED_SESSION_PREFIX)


class ToolConfirmation(BaseModel):
    """What a person is asked (`hint`, `payload`) and what they answered (`confirmed`,
    the payload as they edited it).

    Attributes:
        hint: Tells the person what they are confirming.
        confirmed: The answer: True lets the call run; False (the default) rejects it.
        payload: Any JSON value offered with the question; the person's answer may edit it.
    """

    model_config = ConfigDict(extra="forbid")

    hint: str = ""
    confirmed: bool = False
    payload: Any = None


def confirmation_call_id(call_id: str, asked: int = 0) -> str:
    """The id of the `adk_request_confirmation` call that asks call `call_id`'s question
    `asked` (its `asked_again` when it asked). The first keeps its old, plain id."""
    if not asked:
        return CONFIRMATION_ID_PREFIX + call_id
    return f"{CONFIRMATION_ID_PREFIX}{call_id}~{asked}"


def confirmed_request(confirmation_id: str) -> tuple[str, int] | None:
    """(original call's id, question) that an `adk_request_confirmation` call's id names;
    None if it is not one. A question number that is not one the loop writes (leading
    zeros, `~0`, ten digits or more) is left in the call id, which names no call."""
    named = confirmation_id.removeprefix(CONFIRMATION_ID_PREFIX)
    if not named or named == confirmation_id:
        return None
    again = _ASKED_AGAIN.fullmatch(named)
    return (again["call_id"], int(again["asked"])) if again else (named, 0)


def posted_answer(asked: dict[str, Any], response: dict[str, Any]) -> ToolConfirmation:
    """A person's answer as the tool gets it: the request (`asked`: hint, payload) with
    what they posted (`confirmed`, and the payload if they edited it). ValidationError
    when what was posted is not a confirmation."""
    answered = {k: v for k, v in response.items() if k in ("confirmed", "payload")}
    kept = {k: v for k, v in asked.items() if k in ("hint", "payload")}
    return ToolConfirmation.model_validate({**kept, **answered})


def rejection_message(tool: str) -> str:
    """What the model reads when a person rejected its call."""
    return (
        f"the user rejected this call of {tool!r}; it did not run. Do not call it again "
        "unless the user asks for it."
    )
