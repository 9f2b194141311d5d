"""ADK's `load_artifacts`: the model asks for artifacts by name, and their content goes
with its next model call (only that call: the session keeps the names, not the data).

The call runs on a worker and answers with the names asked for. Before each model
call the orchestrator runs `process_llm_request`: it lists the session's artifacts in
the instruction and, right after a load_artifacts response, adds each named artifact
the session really has.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Sequence
from typing import Any

from google.genai import types

from toolfleet.shared.base_tool import BaseTool
from toolfleet.shared.context import ToolContext
from toolfleet.shared.request_hooks import LlmRequest, RequestContext
from toolfleet.shared.state import USER_PREFIX

log = logging.getLogger(__name__)

# What Gemini takes as inline data; other types go as text or a placeholder.
_INLINE_PREFIXES = ("image/", "audio/", "video/")
_INLINE_TYPES = frozenset({"application/pdf"})
_NOT_INLINE = frozenset({"image/svg", "image/svg+xml", "image/xml"})
_TEXT_TYPES = (
    frozenset({"application/csv", "application/json", "application/svg+xml", "application/xml"})
    | _NOT_INLINE
)
_TEXT_SUFFIXES = (".csv", ".txt", ".json", ".xml")


def _names(value: object) -> list[str] | None:
    """The artifact names in `value`, or None when it is not a list of strings."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        return None
    if not all(isinstance(name, str) for name in value):
        return None
    return list(value)


def _resolve(requested: str, available: set[str]) -> str | None:
    """The listed name the model meant, or None: a name is honoured only if the session's
    listing holds it (models often drop or add the `user:` prefix)."""
    if requested in available:
        return requested
    if requested.startswith(USER_PREFIX):
        return requested if requested.removeprefix(USER_PREFIX) in available else None
    prefixed = f"{USER_PREFIX}{requested}"
    return prefixed if prefixed in available else None


def safe_part(artifact: types.Part, name: str) -> types.Part:
    """The artifact as a model takes it (ADK's as_safe_part_for_llm): inline media as is,
    text-like data as text, anything else as a placeholder naming it."""
    inline = artifact.inline_data
    if inline is None:
        return artifact
    mime = (inline.mime_type or "").split(";", 1)[0].strip().lower()
    if (
        mime
        and mime not in _NOT_INLINE
        and (mime.startswith(_INLINE_PREFIXES) or mime in _INLINE_TYPES)
    ):
        return artifact
    mime = mime or "application/octet-stream"
    given: bytes | str | None = inline.data
    if given is None:
        return types.Part(text=f"[Artifact: {name}, type: {mime}. No inline data was provided.]")
    if isinstance(given, str):
        try:
            data = base64.b64decode(given, validate=True)
        except (binascii.Error, ValueError):
            return types.Part(text=given)
    else:
        data = given
    if mime.startswith("text/") or mime in _TEXT_TYPES or name.lower().endswith(_TEXT_SUFFIXES):
        return types.Part(text=data.decode("utf-8", errors="replace"))
    size_kb = len(data) / 1024
    return types.Part(
        text=f"[Binary artifact: {name}, type: {mime}, size: {size_kb:.1f} KB. "
        "Content cannot be displayed inline.]"
    )


class LoadArtifactsTool(BaseTool):
    """ADK's LoadArtifactsTool: loads the artifacts and adds them to the session."""

    def __init__(self) -> None:
        super().__init__(
            name="load_artifacts",
            description=(
                "Loads artifacts into the session for this request.\n\n"
                "NOTE: Call when you need access to artifacts (for example, uploads saved "
                "by the web UI)."
            ),
        )

    def _get_declaration(self) -> types.FunctionDeclaration:
        return types.FunctionDeclaration(
            name=self.name,
            description=self.description,
            parameters_json_schema={
                "type": "object",
                "properties": {"artifact_names": {"type": "array", "items": {"type": "string"}}},
            },
        )

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        """The names asked for; their content goes with the next model call."""
        names = _names(args.get("artifact_names", []))
        if names is None:
            return {
                "error": "'artifact_names' must be a list of strings.",
                "error_code": "INVALID_ARGUMENTS",
            }
        return {
            "artifact_names": names,
            "status": (
                "artifact contents temporarily inserted and removed. to access"
                " these artifacts, call load_artifacts tool again."
            ),
        }

    async def process_llm_request(
        self, *, tool_context: RequestContext, llm_request: LlmRequest
    ) -> None:
        """List the artifacts in the instruction; add those a load_artifacts response of
        the last content names."""
        listed = await tool_context.list_artifacts()
        if not listed:
            return
        llm_request.append_instructions(
            [
                f"""You have a list of artifacts:
  {json.dumps(listed)}

  When the user asks questions about any of the artifacts, you should call the
  `load_artifacts` function to load the artifact. Always call load_artifacts
  before answering questions related to the artifacts, regardless of whether the
  artifacts have been loaded before. Do not depend on prior answers about the
  artifacts.
  """
            ]
        )
        contents = llm_request.contents
        if not contents or not contents[-1].parts:
            return
        available = set(listed)
        for part in contents[-1].parts:
            response = part.function_response
            if response is None or response.name != self.name:
                continue
            names = _names((response.response or {}).get("artifact_names", []))
            for requested in names or ():
                await self._add(tool_context, llm_request, requested, available)

    async def _add(
        self, context: RequestContext, request: LlmRequest, requested: str, available: set[str]
    ) -> None:
        name = _resolve(requested, available)
        if name is None:
            log.warning("artifact %r is not available in this session, skipping", requested)
            return
        artifact = await context.load_artifact(name)
        if artifact is None:
            log.warning("artifact %r not found, skipping", name)
            return
        part = safe_part(artifact, requested)
        request.append_transient_content(
            types.Content(role="user", parts=[types.Part(text=f"Artifact {requested} is:"), part])
        )


# ADK's `google.adk.tools.load_artifacts` is the tool, as here.
load_artifacts = LoadArtifactsTool()
