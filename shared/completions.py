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

from toolfleet.shared.auth import AuthConfig, CredentialStore
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import (
    AlreadyCompletedError,
    AwaitingCredentialError,
    CallNotPendingError,
    InvalidCompletionError,
)
from toolfleet.shared.keys import Keys
from toolfleet.shared.messages import COMPLETION_FIELD, Completion, PendingCall
from toolfleet.shared.pending import PendingCalls

DEAD_LETTERS_MAXLEN = 10_000
# Applied entries are acknowledged; the stream keeps a bounded history of them.
COMPLETIONS_MAXLEN = 100_000


class Completions:
    """Synchronous client for tickets: list, show, post."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self._redis = client
        self._keys = keys
        self._pending = PendingCalls(keys)

    def pending(self) -> list[PendingCall]:
        """Every pending call (ticket or credential request), oldest first."""
        return self._pending.all(self._redis)

    def get(self, call_id: str) -> PendingCall:
        """The pending call `call_id`; raise CompletionError saying why if it is not."""
        pending = self._pending.get(self._redis, call_id)
        if pending is None:
            raise self._not_pending(call_id)
        return pending

    def post_result(
        self, call_id: str, response: dict[str, Any], *, final: bool = True, source: str = "api"
    ) -> str:
        """Queue a result for a pending call; return the stream entry id."""
        if not isinstance(response, dict):
            raise InvalidCompletionError(
                'a result must be a JSON object, e.g. {"status": "approved"}'
            )
        completion = Completion(
            call_id=call_id, response=response, final=final, source=source, posted_at=time.time()
        )
        pending = self._pending.get(self._redis, call_id)
        if pending is None:
            error = self._not_pending(call_id)
            dead_letter(self._redis, self._keys, completion, str(error))
            raise error
        if pending.kind == "credential":
            raise AwaitingCredentialError(
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
            raise AwaitingCredentialError(f"call {call_id!r} waits for a result, not a credential")
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
        pipe = self._redis.pipeline(transaction=True)
        self._pending.stage_put(pipe, [call])
        pipe.execute()

    def withdraw(self, call_id: str) -> None:
        """The long-running tool failed: there is nothing to complete."""
        pipe = self._redis.pipeline(transaction=True)
        self._pending.stage_drop(pipe, call_id)
        pipe.execute()

    def _not_pending(self, call_id: str) -> AlreadyCompletedError | CallNotPendingError:
        if self._redis.exists(self._keys.applied(call_id)):
            return AlreadyCompletedError(
                f"call {call_id!r} already has its final result; nothing was changed"
            )
        return CallNotPendingError(
            f"no pending call with id {call_id!r}; see `toolfleet tickets list`"
        )


def dead_letter_fields(completion_json: str | bytes, reason: str) -> dict[str, str | bytes]:
    """The dead-letter entry: what was posted, why it was refused, when."""
    return {"completion": completion_json, "reason": reason, "at": json.dumps(time.time())}


def dead_letter(client: redis.Redis, keys: Keys, completion: Completion, reason: str) -> None:
    """Keep a refused completion in the dead-letter stream with its reason."""
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
    settings: Settings,
    source: str = "api",
) -> str:
    """Post a result for a pending call, with the Redis and prefix of `settings`.

    The one-call form of `Completions.post_result` for scripts and other services:
    `post_result(call_id, {"status": "approved"}, settings=Settings())`.
    """
    with redis.Redis.from_url(settings.require_redis_url()) as client:
        return Completions(client, Keys(settings.key_prefix)).post_result(
            call_id, response, final=final, source=source
        )
