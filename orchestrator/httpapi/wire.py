"""Request and response bodies of the HTTP API (its OpenAPI schema is built from these)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from fastapi import Path
from pydantic import BaseModel, ConfigDict, Field, field_validator

from shared.messages import PendingCall
from shared.redaction import redact_args

# Ids in paths and bodies: what `toolfleet run`, uuid4().hex and e-mail-like user ids use.
ID_PATTERN = r"^[A-Za-z0-9._@+-]{1,128}$"
APP_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"

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


class CreateSession(BaseModel):
    model_config = REQUEST

    session_id: str | None = Field(
        default=None, pattern=ID_PATTERN, description="Leave out for a generated id."
    )


class SendMessage(BaseModel):
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


class SuppliedCredential(BaseModel):
    model_config = REQUEST

    credential: str = Field(
        min_length=1,
        max_length=8192,
        description="The token or key the tool asked for; stored encrypted for the user.",
    )


class Decision(BaseModel):
    model_config = REQUEST

    note: str | None = Field(default=None, max_length=2000, description="Added as 'note'.")

    @field_validator("note")
    @classmethod
    def _check_note(cls, value: str | None) -> str | None:
        return None if value is None else _encodable(value)


class Accepted(BaseModel):
    call_id: str
    session_id: str
    final: bool
    entry_id: str = Field(description="The completions-stream entry the orchestrator applies.")
    detail: str


class Ticket(BaseModel):
    """A pending long-running call (secret-named arguments masked)."""

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
        "credential (`toolfleet tickets credential <call_id>`), the ticket is what is needed.",
    )
    ticket: dict[str, Any] = Field(description="The call's initial (pending) response.")
    created_at: float = Field(description="Epoch seconds.")
    age_s: float
    progress: list[dict[str, Any]]

    @classmethod
    def of(cls, call: PendingCall, secret_names: Sequence[str], now: float | None = None) -> Ticket:
        now = time.time() if now is None else now
        return cls(
            **call.model_dump(exclude={"args"}),
            args=redact_args(call.args, secret_names),
            age_s=round(max(0.0, now - call.created_at), 3),
        )


class SessionSummary(BaseModel):
    id: str
    app_name: str
    user_id: str
    created_at: float | None
    events: int
    last_event_at: float | None
    pending: int


class SessionOut(BaseModel):
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
    session_id: str
    invocation_id: str
    answer: str = Field(description="The agent's last text.")
    error: str | None = None
    pending: list[Ticket] = Field(description="Tickets still open when the call returned.")
    settled: bool = Field(description="No ticket is pending and the agent owes no answer.")


class ToolOut(BaseModel):
    name: str
    pool: str
    long_running: bool


class AppOut(BaseModel):
    name: str
    description: str
    tools: list[ToolOut]


class PoolHealth(BaseModel):
    workers: int = Field(description="Live workers serving the pool.")
    needed: bool = Field(description="A served agent has a tool in this pool.")


class Health(BaseModel):
    status: Literal["ok", "degraded", "unavailable"]
    redis: bool
    detail: str
    replica_id: str
    agents: list[str]
    pools: dict[str, PoolHealth]
