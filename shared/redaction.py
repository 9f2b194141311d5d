"""Hide the values of secret-named keys, at any depth, wherever anything is shown or stored.

Shown: logs, Flower's task args, the console, SSE and the HTTP API. Stored: session
events, pending and parked records keep secret-named values as `***` (or sealed, where
the orchestrator must send them again: shared.sealing), so no secret is left in Redis.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from toolfleet.shared.json_depth import JSON_SCALARS
from toolfleet.shared.state import APP_PREFIX, TEMP_PREFIX, USER_PREFIX

if TYPE_CHECKING:
    from google.genai import types

MASK = "***"
# A secret value sealed for the workers (shared.sealing): {"$sealed": "<Fernet token>"}.
SEALED = "$sealed"
DEFAULT_SECRET_NAMES = ("api_key", "password", "secret", "token", "authorization")
_SCOPES = (APP_PREFIX, USER_PREFIX, TEMP_PREFIX)


def is_secret_name(key: Any, secrets: frozenset[str]) -> bool:
    """Whether `key` names a secret: one of `secrets` (as `secret_name_set` folds them)
    in any case, Unicode compatibility form (fullwidth letters) or spelling of its words
    (`API_KEY`, `apiKey`, `api-key`), with or without a state scope prefix
    (`user:api_key` is as secret as `api_key`)."""
    if not isinstance(key, str):
        return False
    name = folded_name(key)
    return name in secrets or (name.partition(":")[2] in secrets and name.startswith(_SCOPES))


# Names folded once each are kept (the same keys come again in every message), up to
# this length: a long key, which no secret name is, would fill the cache.
_CACHED_NAME_CHARS = 64


def folded_name(name: str) -> str:
    """`name` as secret names are compared: its Unicode compatibility form (NFKC: the
    fullwidth letters of `\\uff41\\uff50\\uff49` are `api`) lower-cased, without `_`
    and `-` between its words."""
    return _cached_fold(name) if len(name) <= _CACHED_NAME_CHARS else _fold(name)


def _fold(text: str) -> str:
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    return text.lower().replace("_", "").replace("-", "")


_cached_fold = functools.lru_cache(maxsize=4096)(_fold)


def is_sealed(value: Any) -> bool:
    """Whether `value` is a sealed secret, {"$sealed": "<token>"}."""
    return isinstance(value, Mapping) and len(value) == 1 and isinstance(value.get(SEALED), str)


def mentions_sealed(value: Any) -> bool:
    """Whether the reserved key `$sealed` appears anywhere in `value`."""
    if type(value) in JSON_SCALARS:
        return False  # most values: no ABC check
    if isinstance(value, Mapping):
        return SEALED in value or any(mentions_sealed(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(mentions_sealed(v) for v in value)
    return False


def redact_deep(value: Any, secret_names: Iterable[str], *, keep_sealed: bool = False) -> Any:
    """`value` with the value of every secret-named key (case-insensitive) masked as `***`,
    in nested dicts and lists too; `value` itself when there is nothing to mask.

    The one masking function: for everything shown (logs, Flower, SSE, HTTP, console)
    and stored (events, pending and parked records). `keep_sealed` keeps sealed values
    (for records the orchestrator must send again); shown values are masked either way.
    """
    return _redact(value, secret_name_set(secret_names), keep_sealed)


def _redact(value: Any, secrets: frozenset[str], keep_sealed: bool) -> Any:
    if isinstance(value, Mapping):
        masked: dict[Any, Any] = {}
        changed = False
        for k, v in value.items():
            if is_secret_name(k, secrets):
                kept = keep_sealed and is_sealed(v)
                masked[k] = v if kept else MASK
                changed = changed or not kept
            else:
                masked[k] = _redact(v, secrets, keep_sealed)
                changed = changed or masked[k] is not v
        return masked if changed else value
    if isinstance(value, list | tuple):
        items = [_redact(v, secrets, keep_sealed) for v in value]
        return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
    return value


class _StoredEvent(Protocol):
    content: types.Content | None
    progress: dict[str, Any] | None
    state_delta: dict[str, Any]


def redacted_event_fields(event: _StoredEvent, secrets: Iterable[str]) -> dict[str, Any]:
    """The fields of a session event to store instead, with secret-named keys masked in
    function-call args, function responses, progress and state writes (the state hash
    keeps those, sealed: the event is history only); {} when nothing is masked."""
    secrets = secret_name_set(secrets)
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
    state_delta = redact_deep(event.state_delta, secrets)
    if state_delta is not event.state_delta:
        update["state_delta"] = state_delta
    return update


def may_name_secret(json_text: str | bytes, secrets: frozenset[str]) -> bool:
    """Whether JSON text (as pydantic writes it: characters other than quotes,
    backslashes and controls as they are) may hold a secret-named key or value: False
    only when no secret name (folded, as `secret_name_set` gives them) appears anywhere
    in the text folded the same way (`folded_name`), so that no key can be one. A cheap
    test before walking a large value key by key."""
    if not _findable(secrets):
        return True
    if isinstance(json_text, bytes):
        json_text = json_text.decode("utf-8", "surrogatepass")
    folded = _fold(json_text)
    return any(name in folded for name in secrets)


@functools.lru_cache(maxsize=64)
def findable_in_pieces(secrets: frozenset[str]) -> bool:
    """Whether `may_name_secret` of a JSON text may be asked of its pieces instead, each
    a whole value, the text joined from them at JSON's brackets and commas: no secret
    name holds one of those, so none spans two pieces."""
    return _findable(secrets) and not any(c in "{}[],:" for name in secrets for c in name)


@functools.lru_cache(maxsize=64)
def _findable(secrets: frozenset[str]) -> bool:
    """Whether JSON writes each name as it is (no quote, backslash or control character):
    else a name could be spelled otherwise in the text, and every text may hold it."""
    return not any(c in '"\\' or ord(c) < 0x20 for name in secrets for c in name)


def secret_name_set(secret_names: Iterable[str]) -> frozenset[str]:
    """The secret argument names folded (`folded_name`; built once per list of names:
    every response and event is checked against them)."""
    return _folded(tuple(secret_names))


@functools.lru_cache(maxsize=64)
def _folded(names: tuple[str, ...]) -> frozenset[str]:
    return frozenset(folded_name(name) for name in names)


def mask_url(url: str) -> str:
    """A Redis URL safe to print: its password replaced by `***`."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    auth, at, hosts = parts.netloc.rpartition("@")
    user, has_password, _ = auth.partition(":")
    netloc = f"{user}:{MASK}@{hosts}" if at and has_password else parts.netloc
    # A Sentinel URL carries the sentinels' password in its query.
    query = re.sub(r"(sentinel_password=)[^&]*", rf"\g<1>{MASK}", parts.query)
    return urlunsplit(parts._replace(netloc=netloc, query=query))


# Shorter values are not masked in text: masking every "1" or "ab" of a message would
# hide what it says, and protect no secret worth the name.
_MIN_MASKED_CHARS = 4


def secret_values(value: Any, secret_names: Iterable[str]) -> tuple[str, ...]:
    """The text of every scalar under a secret-named key of `value`, at any depth, of
    _MIN_MASKED_CHARS or more (for `mask_values`: what a tool's error message may quote
    of its arguments)."""
    found: list[str] = []
    _collect_secrets(value, secret_name_set(secret_names), False, found)
    return tuple(dict.fromkeys(found))


def _collect_secrets(value: Any, secrets: frozenset[str], under: bool, found: list[str]) -> None:
    if isinstance(value, Mapping):
        for k, v in value.items():
            _collect_secrets(v, secrets, under or is_secret_name(k, secrets), found)
    elif isinstance(value, list | tuple):
        for v in value:
            _collect_secrets(v, secrets, under, found)
    elif under and isinstance(value, str | int | float) and not isinstance(value, bool):
        text = str(value)
        if len(text) >= _MIN_MASKED_CHARS:
            found.append(text)


def mask_values(text: str, secret_values: Iterable[str]) -> str:
    """`text` with every occurrence of each secret value replaced by `***` (for what a
    remote server sends back: it may echo a token it was given)."""
    for value in sorted({v for v in secret_values if v}, key=len, reverse=True):
        text = text.replace(value, MASK)
    return text
