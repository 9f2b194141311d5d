"""Post ToolResults to a session's results stream (workers, jobs, the CLI)."""

from __future__ import annotations

import redis

from shared.messages import RESULT_FIELD, ToolResult

# An abandoned session's inbox disappears after a day rather than living forever.
STREAM_TTL_S = 24 * 3600


class ResultReporter:
    def __init__(self, client: redis.Redis, maxlen: int) -> None:
        self._client = client
        self._maxlen = maxlen

    def post(self, stream: str, result: ToolResult) -> str:
        pipe = self._client.pipeline(transaction=False)
        pipe.xadd(
            stream, {RESULT_FIELD: result.model_dump_json()}, maxlen=self._maxlen, approximate=True
        )
        pipe.expire(stream, STREAM_TTL_S)
        entry_id, _ = pipe.execute()
        return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
