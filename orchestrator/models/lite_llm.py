"""LiteLlm: ADK's model of the same name, other providers' models through `litellm`.

`LiteLlm(model="openai/gpt-4o", api_base=..., api_key=...)` sends each turn to
`litellm.acompletion` as OpenAI chat messages: the function calls of a model turn go as
one assistant message's `tool_calls`, their responses as `tool` messages naming each
call's id, and the answer's `tool_calls` come back as function calls under the ids the
provider gave them. litellm is the `toolfleet[litellm]` extra, imported on the first call.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import AsyncGenerator
from typing import Any

from google.genai import types
from pydantic import BaseModel, PrivateAttr

from toolfleet.orchestrator.models.base_llm import BaseLlm, LlmResponse
from toolfleet.orchestrator.models.protocol import ModelRequest, text_of
from toolfleet.shared.errors import ConfigError, ModelError

# What litellm's answers end with, as the genai FinishReason ADK's LiteLlm gives.
_FINISH_REASONS = {
    "stop": types.FinishReason.STOP,
    "length": types.FinishReason.MAX_TOKENS,
    "tool_calls": types.FinishReason.STOP,
    "function_call": types.FinishReason.STOP,
    "content_filter": types.FinishReason.SAFETY,
}
# GenerateContentConfig's settings and their OpenAI names (ADK's mapping).
_CONFIG_ARGS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "max_output_tokens": "max_completion_tokens",
    "stop_sequences": "stop",
    "seed": "seed",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
}
# Set by the request itself: a constructor argument may not replace them.
_OWN_ARGS = ("model", "messages", "tools", "stream")


class LiteLlm(BaseLlm):
    """A model served through litellm: any provider it knows, or an OpenAI-compatible
    server (`api_base`). Keyword arguments go to every `litellm.acompletion` call
    (api_key, api_base, timeout, num_retries, extra_headers, ...).

    Args:
        model: litellm's model name, e.g. "openai/gpt-4o".
        **kwargs: Passed to every `acompletion` call, after the request's own settings;
            `model`, `messages`, `tools` and `stream` are the request's and dropped here.
    """

    _additional_args: dict[str, Any] = PrivateAttr(default_factory=dict)

    def __init__(self, model: str, **kwargs: Any) -> None:
        super().__init__(model=model)
        self._additional_args = {k: v for k, v in kwargs.items() if k not in _OWN_ARGS}

    async def generate_content_async(
        self, llm_request: ModelRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        """One `acompletion` call; the whole answer as one LlmResponse (stream or not)."""
        litellm = _litellm()
        config = llm_request.config or types.GenerateContentConfig()
        args: dict[str, Any] = {
            name: getattr(config, setting)
            for setting, name in _CONFIG_ARGS.items()
            if getattr(config, setting) is not None
        }
        tools = _tools(config)
        if tools:
            args["tools"] = tools
        response_format = _response_format(config.response_schema)
        if response_format is not None:  # an output_schema: the answer is JSON of it
            args["response_format"] = response_format
        args.update(self._additional_args)
        try:
            response = await litellm.acompletion(
                model=self.model, messages=messages(llm_request), **args
            )
        except Exception as exc:
            raise ModelError(self._failure(exc)) from exc
        yield self._response(response)

    def _failure(self, exc: Exception) -> str:
        status = getattr(exc, "status_code", None)
        http = f"HTTP {status}: " if isinstance(status, int) else ""
        message = getattr(exc, "message", None) or str(exc)
        return f"LiteLlm {self.model} failed: {http}{type(exc).__name__}: {message}"

    def _response(self, response: Any) -> LlmResponse:
        if not getattr(response, "choices", None):
            raise ModelError(f"LiteLlm {self.model} returned no choices")
        choice = response.choices[0]
        message = choice.message
        parts: list[types.Part] = []
        if message.content:
            parts.append(types.Part(text=message.content))
        for call in message.tool_calls or ():
            parts.append(types.Part(function_call=self._call(call)))
        usage = getattr(response, "usage", None)
        return LlmResponse(
            types.Content(role="model", parts=parts),
            finish_reason=_FINISH_REASONS.get(choice.finish_reason or ""),
            model_version=getattr(response, "model", None),
            usage_metadata=None
            if usage is None
            else types.GenerateContentResponseUsageMetadata(
                prompt_token_count=usage.prompt_tokens,
                candidates_token_count=usage.completion_tokens,
                total_token_count=usage.total_tokens,
            ),
        )

    def _call(self, call: Any) -> types.FunctionCall:
        arguments = call.function.arguments or "{}"
        try:
            args = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise ModelError(
                f"LiteLlm {self.model} called {call.function.name!r} with arguments that are "
                f"not JSON ({exc}): {arguments[:200]!r}"
            ) from exc
        if not isinstance(args, dict):
            raise ModelError(
                f"LiteLlm {self.model} called {call.function.name!r} with arguments that are "
                f"not a JSON object: {arguments[:200]!r}"
            )
        return types.FunctionCall(id=call.id or None, name=call.function.name, args=args)


def _litellm() -> Any:
    """litellm, imported on first use. Its model price list comes from the package, not
    fetched from the network at import (set LITELLM_LOCAL_MODEL_COST_MAP=False to fetch)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm
    except ImportError as exc:
        raise ConfigError(
            "LiteLlm needs the litellm package: pip install 'toolfleet[litellm]'"
        ) from exc
    return litellm


def messages(request: ModelRequest) -> list[dict[str, Any]]:
    """The request as OpenAI chat messages: the system instruction first, then each
    content; a content's function responses become `tool` messages, before its text."""
    config = request.config or types.GenerateContentConfig()
    sent: list[dict[str, Any]] = []
    system = _system_text(config.system_instruction)
    if system:
        sent.append({"role": "system", "content": system})
    open_calls: set[str] = set()  # the last assistant message's calls not answered yet
    for content in request.contents:
        if content.role == "model":
            sent.append(_assistant(content))
            open_calls = {c["id"] for c in sent[-1].get("tool_calls", ())}
            continue
        parts = [p for p in content.parts or () if not p.thought]
        late: list[dict[str, Any]] = []
        for part in parts:
            response = part.function_response
            if response is None:
                continue
            result = json.dumps(response.response, default=str)
            if (response.id or "") in open_calls:
                open_calls.discard(response.id or "")
                sent.append({"role": "tool", "tool_call_id": response.id or "", "content": result})
            else:
                # A long-running call's final result, after its pending one was answered:
                # OpenAI takes tool messages only right after their call, so it is told.
                text = f"The final result of {response.name} (call {response.id}): {result}"
                late.append({"type": "text", "text": text})
        user = late + [_user_part(p) for p in parts if p.function_response is None]
        if user:
            only_text = len(user) == 1 and user[0]["type"] == "text"
            sent.append({"role": "user", "content": user[0]["text"] if only_text else user})
    return sent


def _assistant(content: types.Content) -> dict[str, Any]:
    calls = [
        {
            "id": p.function_call.id or "",
            "type": "function",
            "function": {
                "name": p.function_call.name,
                "arguments": json.dumps(p.function_call.args or {}),
            },
        }
        for p in content.parts or ()
        if p.function_call is not None
    ]
    message: dict[str, Any] = {"role": "assistant", "content": text_of(content) or None}
    if calls:
        message["tool_calls"] = calls
    return message


def _user_part(part: types.Part) -> dict[str, Any]:
    if part.text is not None:
        return {"type": "text", "text": part.text}
    blob = part.inline_data
    if blob is not None and blob.data is not None and (blob.mime_type or "").startswith("image/"):
        data = base64.b64encode(blob.data).decode("ascii")
        return {"type": "image_url", "image_url": {"url": f"data:{blob.mime_type};base64,{data}"}}
    kinds = [k for k, v in part.model_dump(exclude_none=True).items() if v is not None]
    raise ModelError(f"LiteLlm cannot send a part of {', '.join(kinds) or 'no content'}")


def _system_text(instruction: types.ContentUnion | None) -> str:
    if instruction is None:
        return ""
    if isinstance(instruction, str):
        return instruction
    if isinstance(instruction, types.Content):
        return text_of(instruction)
    if isinstance(instruction, types.Part):
        return instruction.text or ""
    # A list of parts; or a lone image or file (PIL's Image when Pillow is installed).
    parts = instruction if isinstance(instruction, list) else [instruction]
    return "\n".join(p if isinstance(p, str) else (getattr(p, "text", None) or "") for p in parts)


def _response_format(schema: types.SchemaUnion | None) -> dict[str, Any] | None:
    """A response schema as OpenAI's `json_schema` response format (not strict: a
    pydantic model's schema need not meet strict mode's rules)."""
    if schema is None:
        return None
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        name, body = schema.__name__, schema.model_json_schema()
    elif isinstance(schema, types.Schema):
        name, body = "response", schema.json_schema.model_dump(mode="json", exclude_none=True)
    elif isinstance(schema, dict):
        name, body = "response", dict(schema)
    else:
        raise ModelError(f"LiteLlm cannot send a response schema of {type(schema).__name__}")
    return {"type": "json_schema", "json_schema": {"name": name, "schema": body}}


def _tools(config: types.GenerateContentConfig) -> list[dict[str, Any]]:
    """The config's function declarations as OpenAI function tools."""
    found: list[dict[str, Any]] = []
    for tool in config.tools or ():
        for declaration in getattr(tool, "function_declarations", None) or ():
            schema = declaration.parameters_json_schema
            if schema is None and declaration.parameters is not None:
                schema = declaration.parameters.json_schema.model_dump(
                    mode="json", exclude_none=True
                )
            found.append(
                {
                    "type": "function",
                    "function": {
                        "name": declaration.name,
                        "description": declaration.description or "",
                        "parameters": schema or {"type": "object", "properties": {}},
                    },
                }
            )
    return found
