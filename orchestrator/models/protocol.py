"""The Model protocol: contents and tool declarations in, one model Content out."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from google.genai import types

from toolfleet.shared.ids import unique_hex
from toolfleet.shared.tools import FunctionTool

# The author of a content that carries the agent's instruction as a user turn (ADK's,
# with static_instruction set): no one's message.
INSTRUCTION_AUTHOR = "instruction"
# The author of a content a tool's process_llm_request adds for one model call only
# (the artifacts load_artifacts asked for): never stored, no one's message.
TRANSIENT_AUTHOR = "transient"

# The loop gives every call an id of its own: tickets, applied records and deliveries
# are keyed by call id alone, so an id a model chose (`call_1` in every session, or one
# replayed) would make two sessions' calls - two users' - one. The model's own id is
# kept inside (`tf-<32 hex>-<model's id>`) and sent back to it, never used as a key.
CLIENT_CALL_ID_PREFIX = "tf-"
_RANDOM_DIGITS = 32
# A model's id kept in the loop's: what a ticket's URL path takes (HTTP ID_PATTERN, 128
# characters in all). Another is not kept: the model gets its calls back id-less,
# matched by order, as Gemini does.
_KEPT_MODEL_ID = re.compile(r"[A-Za-z0-9._@+-]{1,92}")
_LOOP_ID = re.compile(rf"{CLIENT_CALL_ID_PREFIX}[0-9a-f]{{{_RANDOM_DIGITS}}}(?:-(.+))?", re.S)
# The length of a loop's id that keeps no model's id.
_OWN_ID_LENGTH = len(CLIENT_CALL_ID_PREFIX) + _RANDOM_DIGITS


def is_client_call_id(call_id: str | None) -> bool:
    """Whether the loop made this call id up (the model gave none, or a repeat)."""
    return bool(call_id) and str(call_id).startswith(CLIENT_CALL_ID_PREFIX)


def loop_call_id(model_id: str | None) -> str:
    """A new id for a call the model named `model_id` (None: it gave none), unique
    across every session; the model's id is kept in it if it is short and plain."""
    made = f"{CLIENT_CALL_ID_PREFIX}{unique_hex(_RANDOM_DIGITS)}"
    if model_id and _KEPT_MODEL_ID.fullmatch(model_id):
        return f"{made}-{model_id}"
    return made


def model_call_id(call_id: str | None) -> str | None:
    """The id the model gave the call `call_id` (None if it gave none, or one not kept).
    An id the loop did not make (a session stored before ids were the loop's) is the
    model's; one of the loop's older, shorter ids was the loop's own."""
    if not call_id:
        return None
    if not call_id.startswith(CLIENT_CALL_ID_PREFIX):
        return call_id
    if len(call_id) == _OWN_ID_LENGTH:
        # The loop's id with no model's id kept in it (or no id of the loop's at all):
        # none either way. Every request asks this of each call in the history.
        return None
    made = _LOOP_ID.fullmatch(call_id)
    return made.group(1) if made is not None else None


def as_sent(request: ModelRequest) -> ModelRequest:
    """The request a model gets: its calls under the ids it gave them. Callbacks see
    the session's ids (those a ticket and a FunctionResponse name)."""
    contents = model_contents(request.contents)
    if all(a is b for a, b in zip(contents, request.contents, strict=True)):
        return request
    return dataclasses.replace(request, contents=contents)


def model_contents(contents: Sequence[types.Content]) -> list[types.Content]:
    """`contents` with each call and response the model named under the id it gave
    (copied where one changes, the rest shared). A call it gave no id keeps the loop's:
    an adapter leaves those out (`is_client_call_id`)."""
    return [_with_model_ids(c) for c in contents]


def _with_model_ids(content: types.Content) -> types.Content:
    parts = content.parts or ()
    if not any(_renamed(p) for p in parts):
        return content
    copied = content.model_copy(deep=True)
    for part in copied.parts or ():
        named = part.function_call or part.function_response
        if named is not None and _renamed(part):
            named.id = model_call_id(named.id)
    return copied


def _renamed(part: types.Part) -> bool:
    named = part.function_call or part.function_response
    if named is None or not named.id:
        return False
    given = model_call_id(named.id)
    return given is not None and given != named.id


@dataclass
class ModelRequest:
    """What a model gets for one turn: instruction, conversation so far, tools on offer.

    Not frozen: a before_model callback may change it (ADK's LlmRequest) before it is sent.
    Every field has a default, so `LlmRequest(model=..., contents=[...])` builds one as
    ADK's does.

    Attributes:
        agent_name: The agent whose turn it is.
        instruction: The system instruction.
        contents: The conversation so far, oldest first.
        tools: The function tools on offer.
        authors: Who wrote each content ("user", an agent's name, "completion"), aligned
            with `contents` (setting `contents` realigns it); may be empty.
        config: The agent's generate_content_config (a copy), with its planner's thinking
            config and Gemini's built-in tools set; the model adds the instruction and
            the function tools. None: no config.
        model: The model's name (ADK's `llm_request.model`): set for a BaseLlm's call.
    """

    agent_name: str = ""
    instruction: str = ""
    contents: Sequence[types.Content] = field(default_factory=list)
    tools: Sequence[FunctionTool] = ()
    # Who wrote each content ("user", an agent's name, "completion"); may be empty.
    authors: Sequence[str] = ()
    # The agent's generate_content_config (a copy: a callback may change it), with its
    # planner's thinking config and Gemini's built-in tools (`tools`: google_search,
    # url_context, code_execution) set; the model adds the instruction and function tools.
    config: types.GenerateContentConfig | None = None
    # The model's name (ADK's `llm_request.model`): set for a BaseLlm's call.
    model: str | None = None

    def append_instructions(self, instructions: list[str]) -> None:
        """ADK's: add to the system instruction, each a paragraph of its own."""
        self.instruction = "\n\n".join(p for p in [self.instruction, *instructions] if p)

    def __setattr__(self, name: str, value: Any) -> None:
        # A callback may set `contents` (ADK's samples slice the history): `authors`
        # follows, so that it stays aligned (see _realigned).
        if name == "contents" and self.__dict__.get("authors"):
            value = list(value)
            object.__setattr__(self, "authors", self._realigned(value))
        object.__setattr__(self, name, value)
        if name in ("contents", "authors"):
            # Who wrote which content object, as set: the list itself may then be changed
            # in place (`del llm_request.contents[:2]`), which no setter sees.
            contents, authors = self.__dict__.get("contents", ()), self.__dict__.get("authors", ())
            pairs = zip(contents, authors, strict=False)  # authors may be empty
            object.__setattr__(self, "_authored", {id(c): a for c, a in pairs})

    def aligned_authors(self) -> list[str]:
        """`authors` for `contents` as they are now, even after a callback changed the
        list in place: a content kept keeps its author; a new one is the user's, or this
        agent's if the model wrote it. Empty when `authors` is."""
        if not self.authors:
            return []
        if len(self.authors) == len(self.contents):
            return list(self.authors)
        authored: dict[int, str] = self.__dict__.get("_authored", {})
        return [
            authored.get(id(c), self.agent_name if c.role == "model" else "user")
            for c in self.contents
        ]

    def _realigned(self, contents: list[types.Content]) -> list[str]:
        """The authors of `contents`: a content kept from before keeps its author; in a
        list of copies only (as long as before, none kept), each takes the author of the
        one in its place; a new one is the user's, or this agent's if the model wrote it."""
        old, authors = list(self.contents), list(self.authors)
        by_identity = {id(c): a for c, a in zip(old, authors, strict=False)}
        if len(contents) == len(authors) and not any(id(c) in by_identity for c in contents):
            return authors
        return [
            by_identity.get(id(c), self.agent_name if c.role == "model" else "user")
            for c in contents
        ]

    def append_transient_content(self, content: types.Content) -> None:
        """Add a content after the conversation for this model call only (a tool's
        process_llm_request): it is not stored in the session."""
        # `authors` may be empty: then it stays so.
        authors = [*self.authors, TRANSIENT_AUTHOR] if self.authors or not self.contents else None
        self.contents = [*self.contents, content]
        if authors is not None:
            self.authors = authors


class Model(Protocol):
    """Implemented by GeminiModel and ScriptedModel (the offline model)."""

    @property
    def name(self) -> str:
        """The model's name as shown to people, e.g. by the CLI when a conversation starts."""
        ...

    async def generate(self, request: ModelRequest) -> types.Content:
        """The model's next turn (role "model"): text and/or function calls.

        Raises ModelError when no usable turn can be had.
        """
        ...


def function_calls(content: types.Content) -> list[types.FunctionCall]:
    """The function calls of a content, in order."""
    return [p.function_call for p in content.parts or () if p.function_call is not None]


def text_of(content: types.Content | None) -> str:
    """The visible text of a content, thought parts left out; "" for None."""
    if content is None:
        return ""
    return "".join(p.text for p in content.parts or () if p.text and not p.thought)


def declarations(tools: Sequence[FunctionTool]) -> types.Tool | None:
    """The tools' function declarations as one Tool (None when there are none)."""
    if not tools:
        return None
    return types.Tool(
        function_declarations=[
            types.FunctionDeclaration(
                name=t.name,
                description=t.description,
                parameters_json_schema=t.parameters_json_schema,
            )
            for t in tools
        ]
    )
