"""Hide the values of secret-named tool arguments wherever arguments are shown or stored.

Shown: Flower's task args, the console, the HTTP API. Stored: a session's events keep
function-call arguments and function responses with secret-named keys as `***` (at any
depth), so a secret a tool was given or returned is not left in Redis.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from google.genai import types

MASK = "***"


def redact_args(args: Mapping[str, Any], secret_names: Iterable[str]) -> dict[str, Any]:
    """A copy of `args` with the values of secret-named keys masked (case-insensitive)."""
    secrets = {name.lower() for name in secret_names}
    return {k: (MASK if k.lower() in secrets else v) for k, v in args.items()}


def redact_deep(value: Any, secrets: frozenset[str]) -> Any:
    """`value` with every secret-named key masked, in nested dicts and lists too.

    `secrets` are lower-case names. Returns `value` itself when nothing is masked.
    """
    if isinstance(value, Mapping):
        masked = {
            k: (MASK if isinstance(k, str) and k.lower() in secrets else redact_deep(v, secrets))
            for k, v in value.items()
        }
        changed = any(masked[k] is not value[k] for k in value)
        return masked if changed else value
    if isinstance(value, list):
        items = [redact_deep(v, secrets) for v in value]
        return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
    return value


class _StoredEvent(Protocol):
    content: types.Content | None
    progress: dict[str, Any] | None


def redacted_event_fields(event: _StoredEvent, secrets: frozenset[str]) -> dict[str, Any]:
    """The fields of a session event to store instead, with secret-named keys masked in
    function-call args, function responses and progress; {} when nothing is masked."""
    if not secrets:
        return {}
    update: dict[str, Any] = {}
    parts = event.content.parts or [] if event.content is not None else []
    new_parts: list[types.Part] = []
    for part in parts:
        fc, fr = part.function_call, part.function_response
        if fc is not None and fc.args:
            args = redact_deep(fc.args, secrets)
            if args is not fc.args:
                part = part.model_copy(
                    update={"function_call": fc.model_copy(update={"args": args})}
                )
        elif fr is not None and fr.response:
            response = redact_deep(fr.response, secrets)
            if response is not fr.response:
                new_fr = fr.model_copy(update={"response": response})
                part = part.model_copy(update={"function_response": new_fr})
        new_parts.append(part)
    if event.content is not None and any(a is not b for a, b in zip(new_parts, parts, strict=True)):
        update["content"] = event.content.model_copy(update={"parts": new_parts})
    if event.progress:
        progress = redact_deep(event.progress, secrets)
        if progress is not event.progress:
            update["progress"] = progress
    return update


def secret_name_set(secret_names: Iterable[str]) -> frozenset[str]:
    """The secret argument names lower-cased, as `redact_deep` expects them."""
    return frozenset(name.lower() for name in secret_names)


def mask_url(url: str) -> str:
    """A Redis URL safe to print: its password replaced by `***`."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{user}:{MASK}@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))
