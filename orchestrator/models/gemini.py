"""GeminiModel: the Model protocol over the Gemini API (google-genai, async)."""

from __future__ import annotations

import importlib
import math
from collections.abc import Sequence

import httpx
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from toolfleet.orchestrator.models.protocol import (
    ModelRequest,
    declarations,
    is_client_call_id,
)
from toolfleet.orchestrator.models.usage import report_usage
from toolfleet.shared.config import gemini_api_key
from toolfleet.shared.errors import ConfigError, ModelError
from toolfleet.shared.json_depth import SETTING

# Transient statuses the SDK retries with exponential backoff and jitter.
RETRY_HTTP_STATUS_CODES = (408, 429, 500, 502, 503, 504)


def _transport_errors() -> tuple[type[BaseException], ...]:
    """Network errors the SDK can raise, whichever HTTP backend it picked.

    google-genai 2+ defaults to httpx2 (a fork whose exceptions do not subclass
    httpx's) and uses aiohttp for async calls whenever aiohttp is installed.
    """
    found: list[type[BaseException]] = [httpx.HTTPError, TimeoutError]
    for module_name, attr in (("httpx2", "HTTPError"), ("aiohttp", "ClientError")):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        error = getattr(module, attr, None)
        if isinstance(error, type) and issubclass(error, BaseException):
            found.append(error)
    return tuple(found)


_TRANSPORT_ERRORS = _transport_errors()


def _sdk_retried_timeouts() -> tuple[type[BaseException], ...]:
    """Timeouts of the httpx backends, which the SDK's retry options retry.

    aiohttp's timeouts (asyncio.TimeoutError, i.e. TimeoutError) are not retried by
    the SDK: with aiohttp installed a timed-out request fails on its first attempt.
    """
    found: list[type[BaseException]] = [httpx.TimeoutException]
    try:
        module = importlib.import_module("httpx2")
    except ImportError:
        return tuple(found)
    error = getattr(module, "TimeoutException", None)
    if isinstance(error, type) and issubclass(error, BaseException):
        found.append(error)
    return tuple(found)


_RETRIED_TIMEOUTS = _sdk_retried_timeouts()
_TIMEOUTS: tuple[type[BaseException], ...] = (*_RETRIED_TIMEOUTS, TimeoutError)


class GeminiModel:
    """Calls Gemini once per `generate`; the orchestrator loop runs the tools.

    Automatic function calling is off: the SDK would run parallel calls one after
    another in this process and drop their ids, while toolfleet runs them on the
    fleet.
    """

    def __init__(
        self,
        model: str = "gemini-2.5-flash",
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        retry_attempts: int = 4,
        initial_delay_s: float = 1.0,
        timeout_s: float = 120.0,
        client: genai.Client | None = None,
    ) -> None:
        """Builds the model; the SDK client is created here, never at import time.

        Args:
            model: Gemini model name, e.g. "gemini-2.5-flash".
            api_key: Gemini API key; defaults to GOOGLE_API_KEY or GEMINI_API_KEY.
            base_url: Overrides the API endpoint (proxies, tests).
            retry_attempts: Attempts per call, the first included, on 408/429/5xx
                and network errors.
            initial_delay_s: First backoff delay; it doubles after each attempt,
                plus up to as much again of random jitter.
            timeout_s: Time limit of each HTTP attempt (TOOLFLEET_MODEL_TIMEOUT_S);
                one that runs out is retried like a 5xx (the SDK retries httpx's
                timeouts, not aiohttp's). Set on every request, so it also bounds a
                `client` given here.
            client: A ready client; when given, the other connection arguments
                are ignored and no key is needed.

        Raises:
            ConfigError: timeout_s is not a positive finite number, or no client was
                given and no API key could be found.
        """
        if not (math.isfinite(timeout_s) and timeout_s > 0):
            raise ConfigError(
                f"Gemini timeout must be a positive number of seconds, got {timeout_s!r}: "
                "set TOOLFLEET_MODEL_TIMEOUT_S (or timeout_s= of GeminiModel)."
            )
        self._model = model
        self._retry_attempts = retry_attempts
        self._timeout_s = timeout_s
        # HttpOptions.timeout is in whole milliseconds.
        self._timeout_ms = max(1, math.ceil(timeout_s * 1000))
        if client is None:
            key = api_key or gemini_api_key()
            if not key:
                raise ConfigError(
                    "No Gemini API key: set GOOGLE_API_KEY (or GEMINI_API_KEY), or pass "
                    "api_key= to GeminiModel."
                )
            client = genai.Client(
                # Explicit, so GOOGLE_GENAI_USE_VERTEXAI cannot redirect a key-based setup.
                vertexai=False,
                api_key=key,
                http_options=types.HttpOptions(
                    base_url=base_url,
                    retry_options=types.HttpRetryOptions(
                        attempts=retry_attempts,
                        initial_delay=initial_delay_s,
                        # The SDK's jitter is 1 s flat; scale it with the first delay
                        # (the same at the 1 s default) so short delays stay short.
                        jitter=initial_delay_s,
                        http_status_codes=list(RETRY_HTTP_STATUS_CODES),
                    ),
                ),
            )
        self._client = client

    @property
    def name(self) -> str:
        """The Gemini model name."""
        return self._model

    @property
    def timeout_s(self) -> float:
        """Time limit of each HTTP attempt, in seconds."""
        return self._timeout_s

    async def generate(self, request: ModelRequest) -> types.Content:
        """Sends the conversation and tool declarations; returns the model's turn.

        Args:
            request: Instruction, contents so far and the tools on offer.

        Returns:
            The first candidate's Content exactly as received (role "model"); its
            parts keep their thought signatures, which must be sent back as-is.

        Raises:
            ModelError: The call failed after the SDK's retries, or the answer had
                no usable content (blocked prompt, safety stop, empty turn).
        """
        # The agent's config (temperature, safety settings, ...) with what toolfleet sets.
        config = (
            request.config.model_copy(deep=True)
            if request.config is not None
            else types.GenerateContentConfig()
        )
        config.system_instruction = request.instruction or None
        # Built-in tools (google_search, code execution) are in the request's config already.
        declared = declarations(request.tools)
        config.tools = [*(config.tools or ()), *([declared] if declared else [])] or None
        # toolfleet runs the calls itself, in parallel, on the fleet.
        config.automatic_function_calling = types.AutomaticFunctionCallingConfig(disable=True)
        # Per request, so a given client is bounded too. No retry_options here: the
        # client's own retry policy stays in force and retries a timed-out attempt.
        # (The agent's config may add headers; never a timeout, which Agent refuses.)
        http_options = config.http_options or types.HttpOptions()
        http_options.timeout = self._timeout_ms
        config.http_options = http_options
        try:
            response = await self._client.aio.models.generate_content(
                model=self._model,
                contents=outgoing_contents(request.contents),
                config=config,
            )
        except genai_errors.APIError as e:
            raise ModelError(self._api_error_message(e)) from e
        except _TIMEOUTS as e:
            raise ModelError(self._timeout_message(e)) from e
        except _TRANSPORT_ERRORS as e:
            raise ModelError(
                f"Gemini {self._model}: could not reach the API after "
                f"{self._retry_attempts} attempts: {type(e).__name__}: {e}"
            ) from e
        except RecursionError as e:
            # The SDK parses the answer itself, with json.loads: nothing can measure it first.
            raise ModelError(
                f"Gemini {self._model} answered with JSON nested too deep to parse (function-"
                "call arguments past Python's recursion limit); nothing of the turn was kept. "
                f"Arguments that parse but nest over {SETTING} levels get an error response "
                "the model can act on instead."
            ) from e
        report_usage(self._model, response)
        return self._first_content(response)

    def _timeout_message(self, e: BaseException) -> str:
        # Only the httpx backends' timeouts went through the SDK's retries.
        attempts = (
            f" on any of {self._retry_attempts} attempts"
            if isinstance(e, _RETRIED_TIMEOUTS) and self._retry_attempts > 1
            else ""
        )
        return (
            f"Gemini {self._model} did not answer within {self._timeout_s:g} s{attempts} "
            f"({type(e).__name__}); raise TOOLFLEET_MODEL_TIMEOUT_S if the model needs longer."
        )

    def _api_error_message(self, e: genai_errors.APIError) -> str:
        status = f" {e.status}" if e.status else ""
        message = e.message or "no message"
        # A retryable status here means the SDK's attempts ran out.
        after = (
            f" after {self._retry_attempts} attempts" if e.code in RETRY_HTTP_STATUS_CODES else ""
        )
        return f"Gemini {self._model} failed{after}: HTTP {e.code}{status}: {message}"

    def _first_content(self, response: types.GenerateContentResponse) -> types.Content:
        if not response.candidates:
            feedback = response.prompt_feedback
            reason = feedback.block_reason if feedback is not None else None
            detail = feedback.block_reason_message if feedback is not None else None
            why = f"prompt blocked: {_enum_name(reason)}" if reason else "no candidates"
            raise ModelError(
                f"Gemini {self._model} returned no answer ({why})"
                + (f": {detail}" if detail else "")
            )
        candidate = response.candidates[0]
        if candidate.content is None or not candidate.content.parts:
            finish = _enum_name(candidate.finish_reason) if candidate.finish_reason else None
            raise ModelError(
                f"Gemini {self._model} returned an empty turn "
                f"(finish_reason={finish or 'unset'})"
                + (f": {candidate.finish_message}" if candidate.finish_message else "")
            )
        return candidate.content


def outgoing_contents(contents: Sequence[types.Content]) -> list[types.Content]:
    """A deep copy of `contents` with the orchestrator's call ids removed.

    Ids starting with CLIENT_CALL_ID_PREFIX were made up by the loop for calls
    Gemini sent without an id; Gemini never saw them, so its turns and our
    responses go back id-less, matched by order. Everything else, thought
    signatures included, is sent exactly as received. `contents` is not modified.

    Args:
        contents: The conversation as the orchestrator keeps it.

    Returns:
        New Content objects, safe for the SDK to serialize.
    """
    copied = [content.model_copy(deep=True) for content in contents]
    for content in copied:
        for part in content.parts or ():
            if part.function_call is not None and is_client_call_id(part.function_call.id):
                part.function_call.id = None
            if part.function_response is not None and is_client_call_id(part.function_response.id):
                part.function_response.id = None
    return copied


def _enum_name(value: object) -> str:
    # The SDK gives enums for known values and plain strings for new ones.
    name = getattr(value, "name", None)
    return name if isinstance(name, str) else str(value)
