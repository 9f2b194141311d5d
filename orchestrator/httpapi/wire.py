"""Request and response bodies of the HTTP API (its OpenAPI schema is built from these)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal

from fastapi import Path
from fastapi.responses import JSONResponse
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from toolfleet.shared.auth import MAX_CREDENTIAL_CHARS
from toolfleet.shared.finite_json import finite_json
from toolfleet.shared.messages import PendingCall
from toolfleet.shared.redaction import redact_deep

# Ids in paths and bodies: what `toolfleet run`, uuid4().hex and e-mail-like user ids use.
ID_PATTERN = r"^[A-Za-z0-9._@+-]{1,128}$"
APP_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"


def json_text(
    value: Any,
    *,
    separators: tuple[str, str] | None = None,
    default: Callable[[Any], Any] | None = None,
) -> str:
    """`value` as JSON text for a client (an SSE frame's data), NaN and the infinities
    written as null: what JSON.parse and every other strict reader can read. `default`:
    what a value JSON has no type for is written as, as json.dumps takes it."""
    return finite_json(value, ensure_ascii=False, separators=separators, default=default)


class FiniteJSONResponse(JSONResponse):
    """A JSON response whose NaN and infinities are written as null, as the stored events
    have them: JSON has no such numbers, and Python's writer refuses them. A state value
    written before requests were refused them, or by a callback, must not turn a read
    into an error."""

    def render(self, content: Any) -> bytes:
        """The body, as JSONResponse writes it; with such numbers, null in their place."""
        return json_text(content, separators=(",", ":")).encode("utf-8")


User = Annotated[str, Path(pattern=ID_PATTERN, description="The user's id.")]
SessionId = Annotated[str, Path(pattern=ID_PATTERN, description="The session's id.")]
APP = "Agent name: one this orchestrator serves."


def _encodable(value: str) -> str:
    """Refuse text Redis cannot store (lone surrogates are not UTF-8)."""
    try:
        value.encode()
    except UnicodeEncodeError as exc:
        raise ValueError("the text is not valid Unicode (a lone surrogate)") from exc
    return value


class ErrorBody(BaseModel):
    """Every error: a message for people, the status again, and field problems on 422."""

    detail: str = Field(examples=["unknown session 'abc'"])
    status: int = Field(examples=[404])
    errors: list[dict[str, Any]] | None = Field(
        default=None, description="On 422: each problem with its location and message."
    )


# Request bodies are strict: `false` is not a number and `1` is not a boolean.
REQUEST = ConfigDict(extra="forbid", strict=True)


def _whole(value: Any) -> Any:
    """A float with no fractional part as the integer it is: JSON Schema's `integer`
    (what the schema says) takes `3.0`, and JSON has one kind of number."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


# A count in a request body: 3 or 3.0, never -1, "3", 3.5 or true. The bound goes before
# the validator: after it, the schema would say `ge`, which JSON Schema does not know.
Count = Annotated[int, Field(ge=0), BeforeValidator(_whole)]


class CreateSession(BaseModel):
    """A new session, with the id given or a generated one; 409 if the id is taken."""

    model_config = REQUEST

    session_id: str | None = Field(
        default=None, pattern=ID_PATTERN, description="Leave out for a generated id."
    )


class SendMessage(BaseModel):
    """A user message; it starts one invocation of the agent on the session."""

    model_config = REQUEST

    text: str = Field(min_length=1, description="The user's message.")

    _check_text = field_validator("text")(_encodable)


class PostResult(BaseModel):
    """A result for a pending long-running call: the webhook an external system calls."""

    model_config = REQUEST

    response: dict[str, Any] = Field(
        description="The call's function response, a JSON object.",
        examples=[{"status": "approved", "by": "sean"}],
    )
    final: bool = Field(default=True, description="false: an intermediate result (progress).")


class ConfirmationAnswer(BaseModel):
    """A person's answer to a call waiting for a confirmation (ADK's ToolConfirmation)."""

    model_config = REQUEST

    confirmed: bool = Field(description="True: the call is sent; false: it gets an error.")
    payload: Any = Field(
        default=None,
        description="The payload as edited, for the tool's `tool_context.tool_confirmation`; "
        "leave it out to pass the payload it asked with.",
    )
    asked_again: Count | None = Field(
        default=None,
        description="The question answered: the ticket's `asked_again` as shown. A call that "
        "asked again since (a new question, another payload) refuses the answer (409); "
        "leave it out to answer whatever it asks when this arrives.",
    )


class SuppliedCredential(BaseModel):
    """The credential a pending call asked for; it never enters the session or the model's
    input."""

    model_config = REQUEST

    credential: str = Field(
        min_length=1,
        max_length=MAX_CREDENTIAL_CHARS,
        description="The token or key the tool asked for; stored encrypted for the user.",
    )
    asked_again: Count | None = Field(
        default=None,
        description="The request answered: the ticket's `asked_again` as shown. A call that "
        "asked again since (the tool rejected the credential, or wants another) refuses "
        "it (409) and nothing is stored; leave it out to answer whatever it asks when this "
        "arrives.",
    )
    credential_key: str | None = Field(
        default=None,
        min_length=1,
        max_length=1024,
        description="The credential answered: the `key` of the ticket's AuthConfig as shown. "
        "A call that asks for another refuses it (409) and nothing is stored.",
    )

    _check_credential = field_validator("credential")(_encodable)


class Decision(BaseModel):
    """An optional note for an approval or rejection, added to the final result."""

    model_config = REQUEST

    note: str | None = Field(default=None, max_length=2000, description="Added as 'note'.")

    @field_validator("note")
    @classmethod
    def _check_note(cls, value: str | None) -> str | None:
        return None if value is None else _encodable(value)


class Accepted(BaseModel):
    """A result or credential was queued (202); the orchestrator applies it once, and a final
    result or a credential resumes the session's agent."""

    call_id: str
    session_id: str
    final: bool
    entry_id: str = Field(description="The completions-stream entry the orchestrator applies.")
    detail: str


class Ticket(BaseModel):
    """A pending long-running call (secret-named values masked, at any depth)."""

    call_id: str
    tool: str
    session_id: str
    app_name: str
    user_id: str
    agent: str
    invocation_id: str
    args: dict[str, Any]
    kind: str = Field(
        default="result",
        description="result: waits for its result; credential: waits for the user's "
        "credential (`toolfleet tickets credential <call_id>`), the ticket is what is needed; "
        "confirmation: waits for a person's yes or no, the ticket holds the hint and payload "
        "(POST /tickets/{call_id}/confirmation).",
    )
    ticket: dict[str, Any] = Field(description="The call's initial (pending) response.")
    asked_again: int = Field(
        default=0,
        description="How many times the call asked again (a new question once answered): "
        "a confirmation sends it back as the question it answers.",
    )
    created_at: float = Field(description="Epoch seconds.")
    age_s: float
    progress: list[dict[str, Any]]
    actions: list[str] = Field(
        default_factory=list,
        description="What the caller may do with it (approve, reject, result, credential, "
        "confirm); "
        "filled by the /tickets routes.",
    )
    waiting_completions: list[str] = Field(
        default_factory=list,
        description="Stream entry ids of results posted for this call and not applied yet "
        "(filled by GET /tickets/{call_id}). Once one is applied the ticket is gone, and "
        "GET answers 404 saying which completion was applied, and when.",
    )
    asked: str | None = Field(
        default=None,
        description="The user's message that started the invocation which opened the ticket "
        "(filled by the /tickets routes; None when the session no longer holds it).",
    )
    agent_said: str | None = Field(
        default=None,
        description="What the agent said when it made the call: the model's text in that "
        "turn, else its last text before it, else what it told the user while waiting "
        "(filled by the /tickets routes).",
    )
    timeline: str | None = Field(
        default=None,
        description="The session's timeline page, relative to the API's root; only for a "
        "caller that may see the session (its user, or admin).",
    )

    @classmethod
    def of(cls, call: PendingCall, secret_names: Sequence[str], now: float | None = None) -> Ticket:
        """The API view of `call`: values named in `secret_names` masked at any depth,
        `age_s` as of `now` (epoch seconds; default: the current time)."""
        now = time.time() if now is None else now
        shown = redact_deep(call.model_dump(mode="json", exclude={"envelope"}), secret_names)
        return cls(**shown, age_s=round(max(0.0, now - call.created_at), 3))


class Whoami(BaseModel):
    """The caller the request's bearer token identifies."""

    subject: str = Field(description="The user the caller acts as.")
    roles: list[str] = Field(description="admin, approver:<app>, service:<app>[/<tool>].")


class SessionSummary(BaseModel):
    """One of a user's sessions in a listing: its size, last activity and open tickets."""

    id: str
    app_name: str
    user_id: str
    created_at: float | None
    events: int
    last_event_at: float | None
    pending: int


class SessionOut(BaseModel):
    """A whole session: its events, state, and the tickets still pending."""

    id: str
    app_name: str
    user_id: str
    active_agent: str | None = None
    state: dict[str, Any]
    events: list[dict[str, Any]] = Field(
        description="Session events as JSON (google-genai Contents plus metadata), oldest first."
    )
    pending: list[Ticket]


class MessageResult(BaseModel):
    """The outcome of a message: the agent's answer when the invocation ended (or when its
    tickets were answered, within `wait_for_tickets_s`), and the tickets still open."""

    session_id: str
    invocation_id: str
    answer: str = Field(description="The agent's last text.")
    error: str | None = None
    pending: list[Ticket] = Field(description="Tickets still open when the call returned.")
    settled: bool = Field(description="No ticket is pending and the agent owes no answer.")


class ToolOut(BaseModel):
    """A tool of an app: the worker pool it runs in, and whether it is long-running (it
    answers with a ticket, completed later)."""

    name: str
    pool: str
    long_running: bool


class AppOut(BaseModel):
    """An agent this replica serves, with its tools."""

    name: str
    description: str
    tools: list[ToolOut]


class PoolHealth(BaseModel):
    """A worker pool in `/health`: its live workers, and whether a served agent needs it."""

    workers: int = Field(description="Live workers serving the pool.")
    needed: bool = Field(description="A served agent has a tool in this pool.")


class Health(BaseModel):
    """The `/health` answer: `ok`; `degraded` when a needed pool has no live worker;
    `unavailable` (503) when Redis does not answer."""

    status: Literal["ok", "degraded", "unavailable"]
    redis: bool
    detail: str
    replica_id: str
    agents: list[str]
    pools: dict[str, PoolHealth]
