"""A turn's session state, stored once for its calls rather than in each call's message.

Every call carries the state it was sent with, so that its tool sees the state as it was
when the model made the call. Inline, a turn of k calls with s bytes of state puts k x s
bytes on the broker, and every message is parsed whole on its way. A state larger than
INLINE_STATE_MAX_BYTES is instead stored apart, under its SHA-256, by each write that
sends calls naming it, in the same atomic step; each message names the digest
(`ToolCall.state_ref`). The envelope is signed (with a fleet
key) and the worker checks the digest of what it loads, so the state a tool sees is the
one the orchestrator sent. A snapshot lives as long as a call that names it can still be
started (its deadline and the broker's recovery bound, with slack); a call that finds
it gone is answered with a `StateUnavailable` error.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import redis
from pydantic_core import from_json

from toolfleet.shared.keys import Keys
from toolfleet.shared.messages import ToolCall
from toolfleet.shared.sealing import may_hold_sealed

# A state of up to this many bytes of JSON travels in each message, as before: storing it
# apart would cost a worker a read for little.
INLINE_STATE_MAX_BYTES = 1024
# Snapshots a worker process keeps (their text): the calls of one turn share one.
CACHED_SNAPSHOTS = 16


def digest_of(text: bytes) -> str:
    """The SHA-256 of a snapshot's text, as hex."""
    return hashlib.sha256(text).hexdigest()


@dataclass(frozen=True)
class StateSnapshot:
    """A state stored apart: under `key` for `ttl_s` seconds, its JSON `text` (secret-named
    values sealed) and that text's `digest`, which the calls' envelopes name."""

    key: str
    text: bytes
    digest: str
    ttl_s: int


@dataclass(frozen=True)
class LoadedState:
    """A snapshot's state as one call gets it: `values` parsed for that call alone (its
    tool may change them in place), and whether its text may hold sealed values."""

    values: dict[str, Any]
    may_hold_sealed: bool


class SnapshotLoader:
    """Loads the state snapshots calls name, on a worker: each read once from Redis and
    checked against its digest; its text kept for the other calls of its turn, each of
    which gets a parse of its own."""

    def __init__(self, client: redis.Redis, keys: Keys, cached: int = CACHED_SNAPSHOTS) -> None:
        self._client = client
        self._keys = keys
        self._cached = cached
        self._texts: OrderedDict[str, tuple[bytes, bool]] = OrderedDict()  # digest -> text
        self._lock = threading.Lock()  # an io worker admits calls on several threads

    def load(self, call: ToolCall) -> LoadedState | None:
        """The state `call` was sent with (`call.state_ref` must be set), or None when its
        snapshot is gone or is not the one its digest names. Raises redis.RedisError when
        Redis cannot be read."""
        digest = call.state_ref
        assert digest is not None
        with self._lock:
            found = self._texts.get(digest)
            if found is not None:
                self._texts.move_to_end(digest)
        read = found is None
        if found is None:
            text = self._client.get(self._keys.state_snapshot(call.session_key, digest))
            if not isinstance(text, bytes) or digest_of(text) != digest:
                return None
            found = (text, may_hold_sealed(text))
        parsed = from_json(found[0])
        if not isinstance(parsed, dict):
            return None
        if read:  # kept for the turn's other calls
            with self._lock:
                self._texts[digest] = found
                while len(self._texts) > self._cached:
                    self._texts.popitem(last=False)
        return LoadedState(parsed, found[1])
