"""Results signed with the fleet key (HMAC-SHA256), so that a Redis client allowed to
write a results stream cannot forge a result the orchestrator accepts.

Workers sign each ToolResult they post; the orchestrator accepts a result only with a
valid signature when it has the key (`TOOLFLEET_FLEET_KEY`, the same on every host).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

SIGNATURE_FIELD = "sig"


def new_fleet_key() -> str:
    """A random fleet key (64 hex digits) for TOOLFLEET_FLEET_KEY."""
    return secrets.token_hex(32)


class ResultSigner:
    """Signs and checks result payloads with one fleet key."""

    def __init__(self, key: str) -> None:
        self._key = key.encode()

    @classmethod
    def of(cls, key: str | None) -> ResultSigner | None:
        """The signer of the fleet key, or None when no key is set (results unsigned)."""
        return cls(key) if key else None

    def sign(self, payload: bytes) -> str:
        """The payload's signature, as hex."""
        return hmac.new(self._key, payload, hashlib.sha256).hexdigest()

    def valid(self, payload: bytes, signature: bytes | str | None) -> bool:
        """Whether `signature` is the payload's, compared in constant time. Any value at
        all may come from a stream entry: one that is no signature is not valid."""
        if isinstance(signature, str):
            signature = signature.encode("utf-8", "replace")  # non-ASCII: never hex digits
        if not isinstance(signature, bytes):
            return False
        return hmac.compare_digest(self.sign(payload).encode(), signature)
