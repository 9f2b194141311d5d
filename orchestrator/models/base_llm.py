"""ADK's model interface: a BaseLlm subclass (LiteLlm, or a user's own) as a toolfleet Model.

A BaseLlm answers ADK's LlmRequest (`model`, `contents`, and `config` carrying the system
instruction and the function declarations) with LlmResponses from
`generate_content_async`. toolfleet asks it for one turn at a time (stream=False) and
takes the last complete response: its function calls go to the fleet as any model's do.
"""

from __future__ import annotations

import dataclasses
from abc import abstractmethod
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

from google.genai import types
from pydantic import BaseModel, ConfigDict

from toolfleet.orchestrator.models.protocol import ModelRequest, declarations
from toolfleet.orchestrator.models.usage import report_usage
from toolfleet.shared.errors import ModelError


@dataclass
class LlmResponse:
    """ADK's name for a model's answer: its Content, or an error code and message.

    A BaseLlm yields these; a before_model callback that returns one answers in the
    model's place, and an after_model callback may return another to replace it.

    Attributes:
        content: The model's turn (text, function calls); None with an error.
        error_code: Set (or `error_message`): the model failed, and the call raises
            ModelError with both.
        error_message: What went wrong, with `error_code`.
        usage_metadata: Token counts; reported as the model's usage when set.
        partial: True on a streamed fragment; only a response that is not partial counts.
        turn_complete: ADK's streaming flag; not read.
        finish_reason: Why the model stopped; named in the error of an empty turn.
        model_version: The model that answered, reported with the usage.
        custom_metadata: Any data a model or callback attaches; not read.
        grounding_metadata: ADK's; kept on the response, not stored with the turn.
        citation_metadata: ADK's; kept on the response, not stored with the turn.
        interrupted: ADK's; kept on the response, not stored with the turn.
        avg_logprobs: ADK's; kept on the response, not stored with the turn.
        logprobs_result: ADK's; kept on the response, not stored with the turn.
    """

    content: types.Content | None = None
    error_code: str | None = field(default=None, kw_only=True)
    error_message: str | None = field(default=None, kw_only=True)
    usage_metadata: types.GenerateContentResponseUsageMetadata | None = field(
        default=None, kw_only=True
    )
    # Streaming only: a fragment of the turn; toolfleet keeps the complete response.
    partial: bool | None = field(default=None, kw_only=True)
    turn_complete: bool | None = field(default=None, kw_only=True)
    finish_reason: types.FinishReason | None = field(default=None, kw_only=True)
    model_version: str | None = field(default=None, kw_only=True)
    custom_metadata: dict[str, Any] | None = field(default=None, kw_only=True)
    # ADK's other fields a model may set; kept on the response, not stored with the turn.
    grounding_metadata: types.GroundingMetadata | None = field(default=None, kw_only=True)
    citation_metadata: types.CitationMetadata | None = field(default=None, kw_only=True)
    interrupted: bool | None = field(default=None, kw_only=True)
    avg_logprobs: float | None = field(default=None, kw_only=True)
    logprobs_result: types.LogprobsResult | None = field(default=None, kw_only=True)

    def get_function_calls(self) -> list[types.FunctionCall]:
        """The function calls of the content, in order."""
        parts = self.content.parts if self.content is not None else None
        return [p.function_call for p in parts or () if p.function_call is not None]


class BaseLlm(BaseModel):
    """ADK's base class of models: subclass it and implement `generate_content_async`.

    An instance is an agent's `model` (`Agent(model=MyLlm(model="my-model"))`), on the
    orchestrator and for an AgentTool's agent on a worker alike. One instance serves
    the concurrent turns of many sessions.

    Attributes:
        model: The model's name, e.g. "openai/gpt-4o"; passed on in each request.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    model: str
    """The model's name, e.g. "openai/gpt-4o"."""

    @classmethod
    def supported_models(cls) -> list[str]:
        """Regexes of the model names this class serves (ADK's LlmRegistry)."""
        return []

    @abstractmethod
    def generate_content_async(
        self, llm_request: ModelRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        """Yield the model's turn: one LlmResponse (or partial ones, then the whole)."""

    @property
    def name(self) -> str:
        """The model's name, as the CLI shows it."""
        return self.model

    async def generate(self, request: ModelRequest) -> types.Content:
        """toolfleet's Model call: the last complete LlmResponse's content.

        Raises:
            ModelError: generate_content_async raised, yielded an error code, or gave no
                content with parts.
        """
        final: LlmResponse | None = None
        try:
            async for response in self.generate_content_async(adk_request(request, self.model)):
                if not response.partial:
                    final = response
        except ModelError:
            raise
        except Exception as exc:  # a user's model: any failure is the model's error
            raise ModelError(f"model {self.model} failed: {type(exc).__name__}: {exc}") from exc
        if final is None:
            raise ModelError(f"model {self.model} yielded no complete LlmResponse")
        if final.usage_metadata is not None:
            report_usage(
                self.model,
                types.GenerateContentResponse(
                    usage_metadata=final.usage_metadata, model_version=final.model_version
                ),
            )
        return answered(final, f"model {self.model}")


def answered(response: LlmResponse, who: str) -> types.Content:
    """The content of `response`, which must carry a turn.

    Raises:
        ModelError: the response is an error (error_code) or has no content parts.
    """
    if response.error_code or response.error_message:
        raise ModelError(
            f"{who} answered with error {response.error_code or 'unset'}: "
            f"{response.error_message or 'no message'}"
        )
    if response.content is None or not response.content.parts:
        finish = getattr(response.finish_reason, "name", response.finish_reason)
        raise ModelError(f"{who} answered with an empty turn (finish_reason={finish or 'unset'})")
    if response.content.role is None:
        response.content.role = "model"  # ADK's models may leave it unset
    return response.content


def adk_request(request: ModelRequest, model: str) -> ModelRequest:
    """The request as ADK's LlmRequest carries it: the instruction and the tools in the
    config, the model's name set. Contents and config are copies, so a model that changes
    them (ADK's own append a user turn) changes nothing the session keeps."""
    config = (
        request.config.model_copy(deep=True)
        if request.config is not None
        else types.GenerateContentConfig()
    )
    config.system_instruction = request.instruction or None
    declared = declarations(request.tools)
    if declared is not None:
        config.tools = [*(config.tools or ()), declared]
    return dataclasses.replace(
        request,
        contents=[c.model_copy(deep=True) for c in request.contents],
        config=config,
        model=model,
    )
