"""A user's own model, written against ADK's BaseLlm interface: it reads the request as
ADK's LlmRequest carries it and answers with LlmResponses, with no network."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

from google.genai import types
from pydantic import PrivateAttr

from toolfleet.adk import BaseLlm, LlmRequest, LlmResponse


class RuleLlm(BaseLlm):
    """Calls `tool` with the user's text as `arg`; then answers with each response."""

    tool: str
    arg: str
    _requests: list[Any] = PrivateAttr(default_factory=list)

    @classmethod
    def supported_models(cls) -> list[str]:
        return [r"rule-.*"]

    @property
    def requests(self) -> list[Any]:
        """Every LlmRequest it was given (in this process)."""
        return self._requests

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self._requests.append(llm_request)
        usage = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=5, candidates_token_count=3
        )
        last = llm_request.contents[-1]
        responses = [p.function_response for p in last.parts or () if p.function_response]
        if responses:
            text = "; ".join(
                f"{r.name}: {json.dumps(r.response, sort_keys=True)} (by {llm_request.model})"
                for r in responses
            )
            yield LlmResponse(
                content=types.Content(role="model", parts=[types.Part(text=text)]),
                usage_metadata=usage,
            )
            return
        declared = {
            d.name for t in llm_request.config.tools or () for d in t.function_declarations or ()
        }
        if self.tool not in declared:
            yield LlmResponse(error_code="NO_TOOL", error_message=f"{self.tool} is not offered")
            return
        text = "".join(p.text or "" for p in last.parts or ())
        call = types.FunctionCall(id="rule-call-1", name=self.tool, args={self.arg: text})
        yield LlmResponse(
            content=types.Content(role="model", parts=[types.Part(text="...")]),
            partial=True,
            usage_metadata=usage,
        )
        yield LlmResponse(
            content=types.Content(role="model", parts=[types.Part(function_call=call)]),
            usage_metadata=usage,
        )
