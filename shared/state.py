"""Session state as a tool sees it: a snapshot whose writes are recorded as a delta."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

APP_PREFIX = "app:"
USER_PREFIX = "user:"
TEMP_PREFIX = "temp:"


class State(MutableMapping[str, Any]):
    """A snapshot of the session's state whose writes are recorded as a delta.

    Keys follow ADK's scopes: no prefix is this session, `user:` every session of
    the user, `app:` every session of the app, `temp:` this invocation only.
    Deleting a key is recorded as setting it to None, as ADK does.

    Args:
        snapshot: The state as the call saw it; copied, never written to.
    """

    def __init__(self, snapshot: Mapping[str, Any]) -> None:
        self._snapshot = dict(snapshot)
        self._delta: dict[str, Any] = {}

    def __getitem__(self, key: str) -> Any:
        if key in self._delta:
            return self._delta[key]
        return self._snapshot[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._delta[key] = value

    def __delitem__(self, key: str) -> None:
        if key not in self:
            raise KeyError(key)
        self._delta[key] = None

    def __iter__(self) -> Iterator[str]:
        return iter({**self._snapshot, **self._delta})

    def __len__(self) -> int:
        return len({**self._snapshot, **self._delta})

    def __contains__(self, key: object) -> bool:
        return key in self._delta or key in self._snapshot

    @property
    def delta(self) -> dict[str, Any]:
        """Every write since the snapshot, in the order made."""
        return dict(self._delta)

    def has_delta(self) -> bool:
        """Whether the tool wrote or deleted any key."""
        return bool(self._delta)
