"""Text that UTF-8 can carry: lone surrogates replaced.

A Python string may hold lone UTF-16 surrogates (code points U+D800-U+DFFF outside a
pair): `json.loads` makes them from an escape such as `"\\ud800"`, and bytes decoded with
`errors="surrogateescape"` (what Python does with undecodable file names and, under the
C locale, terminal input) hold them. UTF-8 cannot encode them: pydantic, Redis's clients
and the Gemini API refuse such text, so one stray character would fail a whole turn.
Where text comes in (a user's message, a model's turn, a tool's result) each lone
surrogate becomes U+FFFD, as a UTF-8 decoder with `errors="replace"` would make it.
"""

from __future__ import annotations

from typing import Any


def has_lone_surrogates(text: str) -> bool:
    """Whether UTF-8 cannot encode `text` (it holds a lone surrogate)."""
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def replaced(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD (two that make a pair, by the
    character they make)."""
    if not has_lone_surrogates(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def without_lone_surrogates(value: Any) -> Any:
    """`value` (JSON-like: dicts, lists, tuples, strings and scalars) with `replaced`
    applied to every string in it, keys too; the same object where nothing changed."""
    if isinstance(value, str):
        return replaced(value)
    if isinstance(value, dict):
        items = [(without_lone_surrogates(k), without_lone_surrogates(v)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, value.items(), strict=True)):
            return value
        return dict(items)
    if isinstance(value, list | tuple):
        elements = [without_lone_surrogates(v) for v in value]
        if all(v is v0 for v, v0 in zip(elements, value, strict=True)):
            return value
        return type(value)(elements)
    return value
