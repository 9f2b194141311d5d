"""Post ToolResults to a session's results stream (workers, jobs, the CLI)."""

from __future__ import annotations

import redis

from toolfleet.shared.messages import RESULT_FIELD, ToolResult

# An abandoned session's inbox disappears after a day rather than living forever.
STREAM_TTL_S = 24 * 3600


class ResultReporter:
    """Posts ToolResults to results streams, each capped at about `maxlen` entries.

    Each post renews the stream's TTL, so an abandoned session's inbox expires.
    """

    def __init__(self, client: redis.Redis, maxlen: int) -> None:
        self._client = client
        self._maxlen = maxlen

    def post(self, stream: str, result: ToolResult) -> str:
        """Append `result` to `stream` and renew its TTL; return the stream entry id."""
        pipe = self._client.pipeline(transaction=False)
        pipe.xadd(
            stream, {RESULT_FIELD: result.model_dump_json()}, maxlen=self._maxlen, approximate=True
        )
        pipe.expire(stream, STREAM_TTL_S)
        entry_id, _ = pipe.execute()
        return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
