"""Every exception toolfleet raises: one root for operators, one class for the model.

Operators catch `ToolfleetError` (or a subclass, to choose what to do): each message
says what to change. `ToolError` is different: a tool raises it to send a message to
the model, which may then correct its call.
"""

from __future__ import annotations


class ToolfleetError(Exception):
    """Root of every error toolfleet raises to the people who run it."""


class ConfigError(ToolfleetError):
    """A setting is missing or wrong; the message names the setting to change."""


class ToolDefinitionError(ToolfleetError):
    """A function cannot be turned into a tool; raised at definition time.

    Args:
        problems: What is wrong, one sentence each; the message joins them with "; ".
    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


class ModelError(ToolfleetError):
    """The model could not be called or answered with something unusable."""


class SessionError(ToolfleetError):
    """A session cannot be used as asked."""


class SessionNotFoundError(SessionError):
    """No session has this id."""


class ForeignSessionError(SessionNotFoundError):
    """The session is another user's or another app's: to this caller it does not exist."""


class SessionExistsError(SessionError):
    """A session was created with an id that is taken."""


class SessionBusyError(SessionError):
    """Another invocation holds the session's lease; wait for it to end."""


class LeaseLostError(SessionError):
    """This invocation no longer holds the session's lease (it expired, or another
    replica took it): Redis refused its write, and it stops."""


class CompletionError(ToolfleetError):
    """A result (or credential) posted for a long-running call was refused."""


class CallNotPendingError(CompletionError):
    """No pending call has this id (never long-running, or unknown)."""


class AlreadyCompletedError(CompletionError):
    """The call has its final result already; nothing was changed."""


class InvalidCompletionError(CompletionError):
    """The posted payload is not what the call accepts (a result must be an object)."""


class PayloadTooLargeError(InvalidCompletionError):
    """A posted result or confirmation payload is over TOOLFLEET_MAX_PAYLOAD_BYTES."""


class AwaitingCredentialError(CompletionError):
    """The call waits for a credential, not a result (or the other way round), or for
    another credential than the one answered (asked again since, or another key)."""


class AwaitingConfirmationError(CompletionError):
    """The call waits for a person's confirmation, not a result (or the other way round)."""


class CompletionsFullError(CompletionError):
    """The app's completions stream holds its cap of unapplied results: the orchestrators
    are behind or not running. Retry later; the cap is TOOLFLEET_COMPLETIONS_MAXLEN."""


class ToolError(Exception):
    """Raise inside a tool to send `message` to the model as the call's error.

    Unlike other exceptions, its message is meant for the model and is passed on
    verbatim; use it for problems the model can fix (an unknown city, a bad date).
    """
