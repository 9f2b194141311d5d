"""Versioned artifacts in Redis, so any worker reads what another wrote.

Filenames starting with `user:` belong to the user (all their sessions of the app);
others to the session, as in ADK. Versions count from 0.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import redis

from toolfleet.shared.keys import Keys, scope_key
from toolfleet.shared.state import USER_PREFIX

if TYPE_CHECKING:
    from google.genai import types


@dataclass(frozen=True)
class ArtifactVersion:
    """One saved version of an artifact.

    Attributes:
        version: Its number, from 0.
        saved_at: When it was saved (epoch seconds); 0.0 when not recorded.
        mime_type: The MIME type of its inline data; None for text.
    """

    version: int
    saved_at: float
    mime_type: str | None


class ArtifactStore:
    """Artifact versions in Redis: one list of JSON Parts per filename and scope.

    Workers share it through ToolServices, so a tool loads what another worker saved.
    """

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self._redis = client
        self._keys = keys

    def _scope(self, app: str, user: str, session: str, filename: str) -> str:
        if filename.startswith(USER_PREFIX):
            return scope_key(app, user)
        return scope_key(app, user, session)

    def save(self, app: str, user: str, session: str, filename: str, part: types.Part) -> int:
        """Append `part` as a new version of `filename` and return that version (from 0)."""
        scope = self._scope(app, user, session, filename)
        pipe = self._redis.pipeline(transaction=True)
        pipe.rpush(self._keys.artifact(scope, filename), part.model_dump_json(exclude_none=True))
        pipe.rpush(self._keys.artifact_times(scope, filename), repr(time.time()))
        pipe.sadd(self._keys.artifact_names(scope), filename)
        length, _, _ = pipe.execute()
        return int(length) - 1

    def load(
        self, app: str, user: str, session: str, filename: str, version: int | None = None
    ) -> types.Part | None:
        """Version `version` of `filename` (the latest when None), or None if there is none."""
        key = self._keys.artifact(self._scope(app, user, session, filename), filename)
        raw = self._redis.lindex(key, -1 if version is None else version)
        return None if raw is None else _part(raw)

    def list(self, app: str, user: str, session: str) -> list[str]:
        """Sorted filenames of the session's artifacts and of the user's (`user:`) ones."""
        names: set[bytes] = set()
        for scope in (scope_key(app, user, session), scope_key(app, user)):
            names |= self._redis.smembers(self._keys.artifact_names(scope))  # type: ignore[arg-type]
        return sorted(n.decode() for n in names)

    def versions(
        self, app: str, user: str, session: str, filename: str
    ) -> tuple[ArtifactVersion, ...]:
        """Every saved version of `filename`, oldest first; empty when there is none."""
        scope = self._scope(app, user, session, filename)
        pipe = self._redis.pipeline(transaction=True)
        pipe.lrange(self._keys.artifact(scope, filename), 0, -1)
        pipe.lrange(self._keys.artifact_times(scope, filename), 0, -1)
        parts, times = pipe.execute()
        saved = [float(t) for t in times]
        return tuple(
            ArtifactVersion(
                version=version,
                saved_at=saved[version] if version < len(saved) else 0.0,
                mime_type=_mime_type(_part(raw)),
            )
            for version, raw in enumerate(parts)
        )

    def delete(self, app: str, user: str, session: str, filename: str) -> None:
        """Forget `filename` and every version of it (nothing when there is none)."""
        scope = self._scope(app, user, session, filename)
        pipe = self._redis.pipeline(transaction=True)
        pipe.delete(
            self._keys.artifact(scope, filename), self._keys.artifact_times(scope, filename)
        )
        pipe.srem(self._keys.artifact_names(scope), filename)
        pipe.execute()


def _part(raw: bytes | str) -> types.Part:
    # Imported here: google-genai takes half a second to load, and a worker whose tools
    # keep no artifact does without it.
    from google.genai import types

    return types.Part.model_validate_json(raw)


def _mime_type(part: types.Part) -> str | None:
    data = part.inline_data or part.file_data
    return data.mime_type if data is not None else None
