"""Exceptions for operators (one root) and the one exception meant for the model."""

from __future__ import annotations


class ToolfleetError(Exception):
    """Root of every error toolfleet raises to the people who run it."""


class ConfigError(ToolfleetError):
    """A setting is missing or wrong; the message names the setting to change."""


class ToolDefinitionError(ToolfleetError):
    """A function cannot be turned into a tool; raised at definition time."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


class DispatchError(ToolfleetError):
    """A tool call could not be handed to the fleet."""


class ResultTimeoutError(ToolfleetError):
    """A tool result did not arrive before its deadline."""


class ModelError(ToolfleetError):
    """The model could not be called or answered with something unusable."""


class SessionError(ToolfleetError):
    """A session is missing, or is being run by another orchestrator."""


class ToolError(Exception):
    """Raise inside a tool to send `message` to the model as the call's error.

    Unlike other exceptions, its message is meant for the model and is passed on
    verbatim; use it for problems the model can fix (an unknown city, a bad date).
    """
