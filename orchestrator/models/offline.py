"""The offline model: plays a fixed script of turns. It understands nothing.

Each agent (or test) gives a script: a list of steps, each some text and/or function
calls. The step played is the number of model turns since the user's last text
message, so the script needs no memory and survives orchestrator restarts. A step
may be a function of what the model would see (the user's text, the last function
responses) - a rule written by whoever wrote the script, never an interpretation.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from google.genai import types

from toolfleet.orchestrator.contents import call_part, content, text_part
from toolfleet.orchestrator.models.protocol import (
    INSTRUCTION_AUTHOR,
    TRANSIENT_AUTHOR,
    ModelRequest,
)
from toolfleet.shared.errors import ModelError


@dataclass(frozen=True)
class ScriptView:
    """What a scripted step may look at.

    Attributes:
        user_text: The text of the user's last message to this agent.
        responses: The last turn's function responses, as (tool name, response) pairs in
            call order; empty when the last turn was not the tools' answer.
        step: The number of this agent's model turns since that message (0 for the first).
    """

    user_text: str
    responses: Sequence[tuple[str, dict[str, Any]]]  # the last function responses, in call order
    step: int

    def response(self, tool: str) -> dict[str, Any]:
        """The last turn's (first) response from `tool`."""
        for name, response in self.responses:
            if name == tool:
                return response
        got = [name for name, _ in self.responses]
        raise ModelError(f"offline script expected a response from {tool!r}; got {got}")


@dataclass(frozen=True)
class Call:
    """A function call of a scripted step; `args` may be computed from the ScriptView.

    Attributes:
        name: The tool called.
        args: The arguments, or a function of the ScriptView that computes them; default:
            none.
    """

    name: str
    args: Mapping[str, Any] | Callable[[ScriptView], Mapping[str, Any]] = field(
        default_factory=dict
    )


@dataclass(frozen=True)
class Step:
    """One scripted model turn: text, function calls, or both.

    Attributes:
        text: The model's text, or a function of the ScriptView that computes it; None:
            no text.
        calls: The function calls made together in the turn; default: none.
    """

    text: str | Callable[[ScriptView], str] | None = None
    calls: Sequence[Call] = ()


ScriptEntry = Step | Callable[[ScriptView], Step]
Script = Sequence[ScriptEntry]


def say(text: str | Callable[[ScriptView], str]) -> Step:
    """A step that answers with `text` (fixed, or computed from the ScriptView).

    Args:
        text: The answer, or a function of the ScriptView that computes it.

    Returns:
        A Step with that text and no calls.
    """
    return Step(text=text)


def call(*calls: Call) -> Step:
    """A step that makes these function calls, together in one turn.

    Args:
        calls: The function calls, in order.

    Returns:
        A Step with those calls and no text.
    """
    return Step(calls=calls)


class ScriptedModel:
    """Deterministic offline model: each turn plays the next step of a script.

    A script is a sequence of Steps (or functions of the ScriptView that return one);
    step N answers the agent's Nth model turn since the user's last message.

    Args:
        script: The script for any message no `by_message` rule matches.
        by_message: Scripts by a regular expression searched for (ignoring case) in the
            user's text; the first that matches wins.

    Raises:
        ValueError: Neither `script` nor `by_message` is given.
    """

    def __init__(
        self, script: Script | None = None, *, by_message: Mapping[str, Script] | None = None
    ):
        if script is None and not by_message:
            raise ValueError("ScriptedModel needs a script or by_message rules")
        self._default = script
        self._rules = [
            (re.compile(pattern, re.IGNORECASE), s) for pattern, s in (by_message or {}).items()
        ]
        self.requests: list[ModelRequest] = []  # what it was asked, for tests and the CLI

    @property
    def name(self) -> str:
        """A fixed label, shown by the CLI where a Gemini model's name would be."""
        return "offline scripted model"

    async def generate(self, request: ModelRequest) -> types.Content:
        """Play the script's step for this turn; records the request in `requests`.

        Raises ModelError when the script has no such step or no rule for the message.
        """
        self.requests.append(request)
        view = _view(request)
        script = self._script_for(view.user_text)
        if view.step >= len(script):
            raise ModelError(
                f"offline script of agent {request.agent_name!r} has {len(script)} steps and "
                f"step {view.step + 1} was asked for; add a step or end the script with text"
            )
        entry = script[view.step]
        step = entry(view) if callable(entry) else entry
        return _content(step, view)

    def _script_for(self, user_text: str) -> Script:
        for pattern, script in self._rules:
            if pattern.search(user_text):
                return script
        if self._default is None:
            raise ModelError(f"offline script has no rule for the message {user_text!r}")
        return self._default


# Authors of the turns that may hold the user's message (not another agent's).
_OWN_TURNS = ("user", "completion", INSTRUCTION_AUTHOR)


def _view(request: ModelRequest) -> ScriptView:
    """The step is the number of this agent's model turns since the user's last text."""
    contents = request.contents
    authors = request.aligned_authors() or [request.agent_name] * len(contents)
    # The agent's instruction and what tools added for this call only, sent last.
    while authors and authors[-1] in (INSTRUCTION_AUTHOR, TRANSIENT_AUTHOR):
        contents, authors = contents[:-1], authors[:-1]
    user_index = -1
    for i in range(len(contents) - 1, -1, -1):  # the last one: O(turn), not O(history)
        content = contents[i]
        if authors[i] not in _OWN_TURNS and authors[i] != request.agent_name:
            continue  # another agent's turn, shown as context (a workflow's sub-agent)
        if content.role == "user" and any(p.text for p in content.parts or ()):
            user_index = i
            break
    user_text = (
        "".join(p.text or "" for p in contents[user_index].parts or ()) if user_index >= 0 else ""
    )
    after = contents[user_index + 1 :]
    step = sum(
        1
        for c, author in zip(after, authors[user_index + 1 :], strict=True)
        if c.role == "model" and author == request.agent_name
    )
    responses: list[tuple[str, dict[str, Any]]] = []
    if after and after[-1].role == "user":
        for part in after[-1].parts or ():
            if part.function_response and part.function_response.name:
                responses.append(
                    (part.function_response.name, dict(part.function_response.response or {}))
                )
    return ScriptView(user_text=user_text, responses=responses, step=step)


def _content(step: Step, view: ScriptView) -> types.Content:
    parts: list[types.Part] = []
    if step.text is not None:
        parts.append(text_part(step.text(view) if callable(step.text) else step.text))
    for c in step.calls:
        args = c.args(view) if callable(c.args) else c.args
        parts.append(call_part(c.name, dict(args)))
    if not parts:
        raise ModelError("an offline script step must have text or calls")
    return content("model", parts)
