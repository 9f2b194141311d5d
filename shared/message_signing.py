"""HMAC-SHA256 signatures of task messages, under keys derived from the fleet key.

Each kind of message has its own key (HKDF-SHA256 of TOOLFLEET_FLEET_KEY, with an
`info` of its own): results are signed with the fleet key itself, and a signature made
for one kind of message is never valid for another.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from functools import lru_cache
from typing import Any, ClassVar, Self, cast

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF


def derived_key(fleet_key: str, info: bytes) -> bytes:
    """The key of what `info` names, derived from the fleet key (no salt: one key per
    fleet and use)."""
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(
        fleet_key.encode()
    )


class MessageSigner:
    """Signs and checks one kind of message (a subclass names it by its `INFO`) with the
    key derived from one fleet key."""

    INFO: ClassVar[bytes]
    # Each kind's signers, one per fleet key: a key is derived once, not per message.
    _made: ClassVar[Callable[[str], MessageSigner]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._made = lru_cache(maxsize=8)(cls)

    def __init__(self, fleet_key: str) -> None:
        self._key = derived_key(fleet_key, self.INFO)

    @classmethod
    def of(cls, fleet_key: str | None) -> Self | None:
        """The signer of the fleet key, one per key, or None when none is set (the
        messages go unsigned)."""
        return cast(Self, cls._made(fleet_key)) if fleet_key else None

    def sign(self, data: bytes) -> str:
        """The signature of `data`, as hex."""
        return hmac.digest(self._key, data, "sha256").hex()

    def valid(self, data: bytes, signature: object) -> bool:
        """Whether `signature` is that of `data`, compared in constant time. Any value at
        all may come in a message: one that is no signature is not valid (and comparing
        non-ASCII text would raise)."""
        if not isinstance(signature, str) or not signature.isascii():
            return False
        return hmac.compare_digest(self.sign(data), signature)
