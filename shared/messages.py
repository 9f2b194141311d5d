"""What crosses a process boundary: pydantic models validated on arrival, JSON only."""

from __future__ import annotations

import time
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from toolfleet.shared.keys import SessionKey, session_key
from toolfleet.shared.unicode_text import without_lone_surrogates

# The field of a results-stream entry that holds the ToolResult JSON.
RESULT_FIELD = "result"
# On the results feed, beside the result: the session stream and the entry id it has there.
FEED_STREAM_FIELD, FEED_ENTRY_FIELD = "stream", "entry"
# On the results feed too: the entry's number (1, 2, ...; Keys.results_feed_count).
FEED_NUMBER_FIELD = "n"


class CallStatus(StrEnum):
    """A call's outcome: success, error, or pending (a long-running call's first answer).

    Attributes:
        SUCCESS: The tool returned; `response` is what it returned.
        ERROR: The call failed or was refused; `response` is an error response.
        PENDING: A long-running tool's initial answer; the final one is posted later.
    """

    SUCCESS = "success"
    ERROR = "error"
    # The initial result of a long-running tool: the work goes on elsewhere.
    PENDING = "pending"


class ToolActions(BaseModel):
    """Effects a tool asks of the loop, as in ADK's EventActions.

    Attributes:
        skip_summarization: Do not call the model on the function response: it ends the
            agent's turn as is.
        transfer_to_agent: The name of the agent to hand the conversation to.
        escalate: End the enclosing LoopAgent after this agent.
        requested_auth: An AuthConfig as JSON: the call needs a credential the user has
            not supplied; the call waits for it.
        requested_confirmation: A ToolConfirmation as JSON: the call waits for a person's
            yes or no.
        artifact_delta: Each artifact the call saved, by filename, and its new version.
    """

    model_config = ConfigDict(extra="forbid")

    skip_summarization: bool = False
    transfer_to_agent: str | None = None
    escalate: bool = False
    # An AuthConfig as JSON: the tool needs a credential the user has not supplied.
    requested_auth: dict[str, Any] | None = None
    # A ToolConfirmation as JSON (hint, payload): the call waits for a person's yes or no.
    requested_confirmation: dict[str, Any] | None = None
    # Artifacts the call saved, each filename's new version (ADK's artifact_delta).
    artifact_delta: dict[str, int] = Field(default_factory=dict)

    def waits(self) -> bool:
        """Whether the call waits for the user (a credential or a confirmation): its turn
        is parked, and the model sees its response once it ran again."""
        return self.requested_auth is not None or self.requested_confirmation is not None


class ToolCall(BaseModel):
    """The envelope of one function call, the single argument of a `tool.<name>` task.

    Attributes:
        call_id: The function call's id; the result carries it back.
        tool: The tool's name.
        args: The model's arguments, as JSON.
        session_id: The session's id, within its app and user.
        app_name: The session's app.
        user_id: The session's user.
        invocation_id: The invocation (one user message's run) that made the call.
        agent: The name of the agent whose model made the call.
        state: A snapshot of the session's state, all scopes, when the call was sent.
        reply_to: The Redis stream the ToolResult is posted to.
        dispatched_at: Epoch seconds when the orchestrator sent it.
        depth: How deep in agent tools the calling agent runs; 0 at the top.
        confirmation: A ToolConfirmation as JSON: a person's answer, for a call sent once
            it was confirmed; None otherwise.
        max_llm_calls: The calling run's ceiling on model calls (ADK's
            RunConfig.max_llm_calls), which an agent tool's run obeys too, counted apart;
            None: the run has none.
        state_ref: The SHA-256 (hex) of the state snapshot stored apart for the turn's
            calls (Keys.state_snapshot), when it was too large to send in each message;
            `state` is then empty until the worker loads it. None: `state` is the
            snapshot.
    """

    model_config = ConfigDict(extra="forbid")

    call_id: str
    tool: str
    args: dict[str, Any]
    session_id: str
    app_name: str
    user_id: str
    invocation_id: str
    agent: str
    state: dict[str, Any] = Field(default_factory=dict, description="Snapshot, all scopes.")
    reply_to: str = Field(description="Redis stream the ToolResult is posted to.")
    dispatched_at: float = Field(description="Epoch seconds when the orchestrator sent it.")
    depth: int = Field(default=0, ge=0, description="Agent-tool nesting level of the caller.")
    # A ToolConfirmation as JSON: a person's answer, for a call sent once it was confirmed.
    confirmation: dict[str, Any] | None = None
    # The calling run's max_llm_calls, for an agent tool's run to obey (None: none).
    max_llm_calls: int | None = None
    # The digest of the state stored apart (shared.state_snapshots); None: inline.
    state_ref: str | None = None

    @property
    def session_key(self) -> SessionKey:
        """The key of the call's session (its id names it only within app and user)."""
        return session_key(self.app_name, self.user_id, self.session_id)


class ToolResult(BaseModel):
    """The outcome of one call, posted with XADD to the session's results stream.

    Attributes:
        call_id: The id of the function call answered.
        tool: The tool's name.
        session_id: The session's id, within its app and user.
        invocation_id: The invocation that made the call.
        status: Success, error, or pending (a long-running call's initial answer).
        response: The function response the model gets.
        wrapped: The tool returned a value that is not a dict: `response` is
            `{"result": value}`, and after_tool callbacks get the value itself.
        state_delta: The state writes the tool made.
        actions: The effects the tool asked of the loop.
        worker: Hostname of the worker (or `"orchestrator"`).
        pid: The process id that ran the tool; 0 when unknown.
        started_at: Epoch seconds when the tool started; 0 when unknown.
        finished_at: Epoch seconds when the tool returned; 0 when unknown.
        attempt: 1 for the first delivery, more after retries.
        traceparent: W3C traceparent of the worker's span of the run (tracing on).
    """

    model_config = ConfigDict(extra="forbid")

    call_id: str
    tool: str
    session_id: str
    invocation_id: str
    status: CallStatus
    response: dict[str, Any]
    # The tool returned a value that is not a dict: `response` is {"result": value}, and
    # after_tool callbacks get the value itself, as ADK passes what the tool returned.
    wrapped: bool = False
    state_delta: dict[str, Any] = Field(default_factory=dict)
    actions: ToolActions = Field(default_factory=ToolActions)
    worker: str = Field(default="", description="Hostname of the worker (or 'orchestrator').")
    pid: int = 0
    started_at: float = 0.0
    finished_at: float = 0.0
    attempt: int = Field(default=1, description="1 for the first delivery, more after retries.")
    traceparent: str | None = Field(
        default=None, description="W3C traceparent of the worker's span of the run (tracing on)."
    )

    @property
    def duration_s(self) -> float:
        """Seconds the tool ran on the worker; 0 when the times are unknown."""
        return max(0.0, self.finished_at - self.started_at)


def error_response(error_type: str, message: str, **extra: Any) -> dict[str, Any]:
    """The function response the model gets for any failed or refused call."""
    return {"status": "error", "error_type": error_type, "error_message": message, **extra}


def answered_result(
    call: ToolCall,
    status: CallStatus,
    response: dict[str, Any],
    *,
    worker: str,
    actions: ToolActions | None = None,
    pid: int = 0,
    attempt: int = 1,
) -> ToolResult:
    """The result of a call answered at once, where it is (not a tool's run)."""
    now = time.time()
    return ToolResult(
        call_id=call.call_id,
        tool=call.tool,
        session_id=call.session_id,
        invocation_id=call.invocation_id,
        status=status,
        response=response,
        actions=actions or ToolActions(),
        worker=worker,
        pid=pid,
        started_at=now,
        finished_at=now,
        attempt=attempt,
    )


def error_result(
    call: ToolCall, error_type: str, message: str, *, worker: str, pid: int = 0, attempt: int = 1
) -> ToolResult:
    """The result of a call answered with an error without running its tool."""
    response = error_response(error_type, message)
    return answered_result(
        call, CallStatus.ERROR, response, worker=worker, pid=pid, attempt=attempt
    )


class RunningCall(BaseModel):
    """Who started a call, and when: a worker's note beside its delivery count."""

    model_config = ConfigDict(extra="forbid")

    worker: str
    pid: int
    started_at: float
    # Set while the call waits for its tool's fleet-wide limit ("a slot", "its rate"):
    # since `started_at`, it has not started running.
    waiting_for: str | None = None


class PendingCall(BaseModel):
    """A long-running call whose final result has not been applied yet.

    Attributes:
        call_id: The id of the function call.
        tool: The tool's name.
        session_id: The session's id, within its app and user.
        app_name: The session's app.
        user_id: The session's user.
        agent: The name of the agent whose model made the call.
        invocation_id: The invocation that made the call.
        args: The call's arguments.
        ticket: The initial (pending) response; for a credential request the AuthConfig,
            for a confirmation request the ToolConfirmation asked.
        created_at: Epoch seconds when the record was made.
        progress: The latest progress responses posted (`PROGRESS_KEPT` at most), in order.
        kind: What the call waits for: its result (`"result"`), a user's credential
            (`"credential"`: the call runs again once supplied), or a person's answer
            (`"confirmation"`).
        turn_id: The parked turn whose other results wait with this one; None if none.
        envelope: The call to send again once a credential is supplied; None otherwise.
        traceparent: The W3C traceparent of the call's run, which the completion's span
            links to.
        answered_by_user: Its tool's final result is the session's user's answer
            (`LongRunningFunctionTool(answered_by_user=True)`): that user may post it.
        asked_again: How many times the call asked again for what it waits for, once
            given it.
    """

    model_config = ConfigDict(extra="forbid")

    call_id: str
    tool: str
    session_id: str
    app_name: str
    user_id: str
    agent: str
    invocation_id: str
    args: dict[str, Any] = Field(default_factory=dict)
    ticket: dict[str, Any] = Field(description="The initial (pending) response.")
    created_at: float
    progress: list[dict[str, Any]] = Field(default_factory=list)
    # A credential request: the call runs again once the user supplies what `ticket`
    # (an AuthConfig) describes; the turn's other results wait in `turn_id`'s record.
    # A confirmation request likewise, `ticket` being the ToolConfirmation asked.
    kind: Literal["result", "credential", "confirmation"] = "result"
    turn_id: str | None = None
    envelope: ToolCall | None = None
    # The W3C traceparent of the call's run: the span its completion's span links to.
    traceparent: str | None = None
    answered_by_user: bool = False
    # How many times the call asked again (a confirmation after one was given): an answer
    # posted for an earlier question does not answer this one.
    asked_again: int = 0

    @property
    def session_key(self) -> SessionKey:
        """The key of the call's session (its id names it only within app and user)."""
        return session_key(self.app_name, self.user_id, self.session_id)

    @classmethod
    def starting(
        cls,
        call: ToolCall,
        ticket: dict[str, Any] | None = None,
        traceparent: str | None = None,
        *,
        answered_by_user: bool = False,
    ) -> PendingCall:
        """The record a worker registers for a long-running call it runs.

        `ticket` is the tool's initial response; empty when registered before the tool ran.
        `traceparent`: the worker's span of the run, when tracing is on.
        `answered_by_user`: its tool's result is the session's user's answer.
        """
        return cls(
            call_id=call.call_id,
            tool=call.tool,
            session_id=call.session_id,
            app_name=call.app_name,
            user_id=call.user_id,
            agent=call.agent,
            invocation_id=call.invocation_id,
            args=call.args,
            ticket=ticket or {},
            created_at=call.dispatched_at,
            traceparent=traceparent,
            answered_by_user=answered_by_user,
        )


class Completion(BaseModel):
    """A result posted for a pending call: intermediate (progress) or final."""

    model_config = ConfigDict(extra="forbid")

    call_id: str
    session_key: str | None = Field(
        default=None, description="The call's session (its SessionKey): orders its completions."
    )
    response: dict[str, Any]
    final: bool = True
    # cancel: close the ticket with a Cancelled error response, whatever it waits for.
    kind: Literal["result", "credential", "confirmation", "cancel"] = "result"
    # Whether the agent answers once this is applied; a session's cancellation closes its
    # tickets without calling the model again.
    resume: bool = True
    source: str = Field(default="api", description="Who posted it: cli, job, http, api.")
    posted_at: float
    # A confirmation or a credential: the call's `asked_again` when it was posted. A call
    # that asked again since (a new question) does not take it; None: posted by a version
    # that did not say.
    asked_again: int | None = None

    # A response from outside (an HTTP body's "\ud800") may hold text UTF-8 cannot carry;
    # so may the call id it names (a shell's undecodable bytes), which no call has.
    _encodable_response = field_validator("response")(without_lone_surrogates)
    _encodable_call_id = field_validator("call_id")(without_lone_surrogates)


COMPLETION_FIELD = "completion"
