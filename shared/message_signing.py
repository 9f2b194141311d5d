"""HMAC-SHA256 signatures of task messages, under keys derived from the fleet key.

Each kind of message has its own key (HKDF-SHA256 of TOOLFLEET_FLEET_KEY, with an
`info` of its own): results are signed with the fleet key itself, and a signature made
for one kind of message is never valid for another.
"""

from __future__ import annotations

import hmac

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF


def derived_key(fleet_key: str, info: bytes) -> bytes:
    """The key of the messages named by `info`, derived from the fleet key (no salt: one
    key per fleet and kind)."""
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(
        fleet_key.encode()
    )


class MessageSigner:
    """Signs and checks one kind of message (`info`) with the key derived from one fleet
    key."""

    def __init__(self, fleet_key: str, info: bytes) -> None:
        self._key = derived_key(fleet_key, info)

    def sign(self, data: bytes) -> str:
        """The signature of `data`, as hex."""
        return hmac.digest(self._key, data, "sha256").hex()

    def valid(self, data: bytes, signature: object) -> bool:
        """Whether `signature` is that of `data`, compared in constant time."""
        if not isinstance(signature, str):
            return False
        return hmac.compare_digest(self.sign(data), signature)
