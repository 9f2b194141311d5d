"""Post results for pending long-running calls (CLI, background jobs, Python callers).

The poster checks the call is still pending and refuses with a clear error if not;
the orchestrator's consumer checks again and applies each call's final result once.
Every refusal is kept in the dead-letter stream.
"""

from __future__ import annotations

import json
import time
from typing import Any

import redis

from shared.auth import AuthConfig, CredentialStore
from shared.config import Settings
from shared.errors import ToolfleetError
from shared.keys import Keys
from shared.messages import COMPLETION_FIELD, Completion, PendingCall

DEAD_LETTERS_MAXLEN = 10_000
# Applied entries are acknowledged; the stream keeps a bounded history of them.
COMPLETIONS_MAXLEN = 100_000


class CompletionError(ToolfleetError):
    """The completion was refused (unknown call, already completed, bad payload)."""


class Completions:
    """Synchronous client for tickets: list, show, post."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self._redis = client
        self._keys = keys

    def pending(self) -> list[PendingCall]:
        raw = self._redis.hgetall(self._keys.pending())
        calls = [PendingCall.model_validate_json(v) for v in raw.values()]
        return sorted(calls, key=lambda c: c.created_at)

    def get(self, call_id: str) -> PendingCall:
        raw = self._redis.hget(self._keys.pending(), call_id)
        if raw is None:
            raise CompletionError(self._why_not_pending(call_id))
        return PendingCall.model_validate_json(raw)

    def post_result(
        self, call_id: str, response: dict[str, Any], *, final: bool = True, source: str = "api"
    ) -> str:
        """Queue a result for a pending call; return the stream entry id."""
        if not isinstance(response, dict):
            raise CompletionError('a result must be a JSON object, e.g. {"status": "approved"}')
        completion = Completion(
            call_id=call_id, response=response, final=final, source=source, posted_at=time.time()
        )
        raw = self._redis.hget(self._keys.pending(), call_id)
        if raw is None:
            reason = self._why_not_pending(call_id)
            dead_letter(self._redis, self._keys, completion, reason)
            raise CompletionError(reason)
        pending = PendingCall.model_validate_json(raw)
        if pending.kind == "credential":
            raise CompletionError(
                f"call {call_id!r} waits for a credential: `toolfleet tickets credential {call_id}`"
            )
        completion.session_id = pending.session_id
        entry_id = self._redis.xadd(
            self._keys.completions(pending.app_name),
            {COMPLETION_FIELD: completion.model_dump_json()},
        )
        return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)

    def supply_credential(
        self, call_id: str, credential: str, store: CredentialStore, *, source: str = "api"
    ) -> str:
        """Store the user's credential (encrypted, per user) and re-run the waiting call.

        The credential itself never enters the completions stream or the session.
        """
        pending = self.get(call_id)
        if pending.kind != "credential":
            raise CompletionError(f"call {call_id!r} waits for a result, not a credential")
        store.put(
            pending.app_name, pending.user_id, AuthConfig.model_validate(pending.ticket), credential
        )
        completion = Completion(
            call_id=call_id,
            session_id=pending.session_id,
            response={},
            kind="credential",
            source=source,
            posted_at=time.time(),
        )
        entry_id = self._redis.xadd(
            self._keys.completions(pending.app_name),
            {COMPLETION_FIELD: completion.model_dump_json()},
            maxlen=COMPLETIONS_MAXLEN,
            approximate=True,
        )
        return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)

    def register(self, call: PendingCall) -> None:
        """Record a long-running call as pending (workers do this before running it, so a
        background job it starts can post a result at any time)."""
        self._redis.hset(self._keys.pending(), call.call_id, call.model_dump_json())

    def withdraw(self, call_id: str) -> None:
        """The long-running tool failed: there is nothing to complete."""
        self._redis.hdel(self._keys.pending(), call_id)

    def _why_not_pending(self, call_id: str) -> str:
        if self._redis.exists(self._keys.applied(call_id)):
            return f"call {call_id!r} already has its final result; nothing was changed"
        return f"no pending call with id {call_id!r}; see `toolfleet tickets list`"


def dead_letter_fields(completion_json: str | bytes, reason: str) -> dict[str, str | bytes]:
    """The dead-letter entry: what was posted, why it was refused, when."""
    return {"completion": completion_json, "reason": reason, "at": json.dumps(time.time())}


def dead_letter(client: redis.Redis, keys: Keys, completion: Completion, reason: str) -> None:
    client.xadd(
        keys.dead_letters(),
        dead_letter_fields(completion.model_dump_json(), reason),  # type: ignore[arg-type]
        maxlen=DEAD_LETTERS_MAXLEN,
        approximate=True,
    )


def post_result(
    call_id: str,
    response: dict[str, Any],
    final: bool = True,
    *,
    settings: Settings | None = None,
    source: str = "api",
) -> str:
    """Post a result for a pending call, with the Redis and prefix from settings.

    The one-call form of `Completions.post_result` for scripts and other services.
    """
    settings = settings or Settings()
    with redis.Redis.from_url(settings.require_redis_url()) as client:
        return Completions(client, Keys(settings.key_prefix)).post_result(
            call_id, response, final=final, source=source
        )
