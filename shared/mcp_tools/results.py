"""An MCP tool result as a toolfleet function response: content for the model, bounded."""

from __future__ import annotations

from typing import Any

from mcp_types import CallToolResult, EmbeddedResource, ImageContent, TextContent

from toolfleet.shared.errors import ToolError
from toolfleet.shared.remote_auth import Secrets

# Characters of text an MCP result may bring to the model; the rest is cut and marked.
DEFAULT_MAX_RESULT_CHARS = 200_000


def to_response(
    result: CallToolResult, secrets: Secrets, max_chars: int = DEFAULT_MAX_RESULT_CHARS
) -> Any:
    """The function response: the structured content when there is some, else the text;
    `secrets` (what was sent, secret-named keys) masked.

    An error result (`isError`) raises ToolError with its text: the model's error response.
    Images and other binary content are described, not sent (the model gets text).
    """
    text = secrets.mask("\n".join(_text(block) for block in result.content))
    if result.is_error:
        raise ToolError(_cut(text, max_chars) or "the MCP tool reported an error")
    structured = secrets.mask(result.structured_content)
    if structured is not None:
        if len(repr(structured)) > max_chars:
            return {"result": _cut(text, max_chars), "truncated": True}
        return structured
    cut = _cut(text, max_chars)
    return {"result": cut, "truncated": True} if cut != text else {"result": text}


def _text(block: Any) -> str:
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ImageContent):
        return f"[image, {block.mime_type}, {len(block.data) * 3 // 4} bytes]"
    if isinstance(block, EmbeddedResource):
        resource = block.resource
        inner = getattr(resource, "text", None)
        return inner if isinstance(inner, str) else f"[resource {resource.uri}]"
    return f"[{getattr(block, 'type', 'content')}]"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit]
