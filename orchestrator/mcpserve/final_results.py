"""The final result of a long-running call started through `toolfleet mcp serve`.

Such a call has no toolfleet session to resume: its results, posted to the completions
stream as for any ticket, are read here when the MCP client asks for them, and removed
once the final one was handed over.
"""

from __future__ import annotations

from typing import Any

import redis

from toolfleet.shared.completions import Completions
from toolfleet.shared.errors import CompletionError
from toolfleet.shared.keys import Keys
from toolfleet.shared.messages import COMPLETION_FIELD, Completion, error_response


class FinalResults:
    """Looks up what was posted for long-running calls of one app (synchronous Redis)."""

    def __init__(self, client: redis.Redis, keys: Keys, completions: Completions, app: str):
        self._redis = client
        self._keys = keys
        self._completions = completions
        self._app = app

    def fetch(self, call_id: str) -> dict[str, Any]:
        """The call's final result once posted (then forgotten); else its status and the
        latest progress. An error response for an unknown call or another app's."""
        try:
            pending = self._completions.get(call_id)
        except CompletionError as exc:
            return error_response("UnknownCall", str(exc))
        if pending.app_name != self._app:
            return error_response("UnknownCall", f"no pending call with id {call_id!r}")
        entry_ids = self._completions.waiting(pending)
        stream = self._keys.completions(pending.app_name)
        posted: list[tuple[str, Completion]] = []
        for entry_id in entry_ids:
            entries: Any = self._redis.xrange(stream, entry_id, entry_id)
            for _, fields in entries:
                raw = fields[COMPLETION_FIELD.encode()]
                posted.append((entry_id, Completion.model_validate_json(raw)))
        final = next((c for _, c in posted if c.final), None)
        if final is None:
            progress = [c.response for _, c in posted]
            return {"status": "pending", "call_id": call_id, "progress": progress[-5:]}
        pipe = self._redis.pipeline()
        pipe.xdel(stream, *[entry_id for entry_id, _ in posted])
        for entry_id, _ in posted:
            pipe.lrem(self._keys.completion_order(pending.session_id), 0, entry_id)
        pipe.execute()
        self._completions.withdraw(call_id)
        return final.response
