"""Secret values sealed for the workers: in task messages, results streams and the
records the orchestrator sends again, never in clear.

Each secret-named value (TOOLFLEET_SECRET_ARG_NAMES, at any depth) becomes
{"$sealed": "<Fernet token>"}, encrypted with a key derived (HKDF-SHA256) from the fleet
key TOOLFLEET_FLEET_KEY, which only the fleet's workers and orchestrators hold. Without
a fleet key nothing is sealed: secrets travel in clear (the orchestrator warns at start).
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any

from cryptography.fernet import Fernet, InvalidToken

from toolfleet.shared.config import Settings
from toolfleet.shared.errors import ToolfleetError
from toolfleet.shared.json_depth import JSON_SCALARS
from toolfleet.shared.message_signing import derived_key
from toolfleet.shared.redaction import (
    DEFAULT_SECRET_NAMES,
    SEALED,
    is_sealed,
    is_secret_name,
    may_name_secret,
    secret_name_set,
)

log = logging.getLogger(__name__)

# HKDF's `info`: this key seals secrets and nothing else (the fleet key also signs results,
# and a key derived apart signs calls).
_INFO = b"toolfleet seal v1"


class SealError(ToolfleetError):
    """A sealed value could not be opened: another fleet key sealed it, or none is set."""


def seal_key(fleet_key: str) -> bytes:
    """The Fernet key derived from the fleet key (HKDF-SHA256, no salt: one key per fleet)."""
    return base64.urlsafe_b64encode(derived_key(fleet_key, _INFO))


class Sealer:
    """Seals the values of secret-named keys and opens sealed values, with one fleet key."""

    def __init__(self, fleet_key: str, secret_names: Iterable[str]) -> None:
        self._fernet = Fernet(seal_key(fleet_key))
        self._secrets = secret_name_set(secret_names)

    def may_seal(self, text: bytes) -> bool:
        """Whether `seal` may have something to seal in the value whose JSON is `text`:
        False when no secret name appears anywhere in it (`may_name_secret`), so that the
        common value, with none, is not walked at all."""
        return may_name_secret(text, self._secrets)

    @classmethod
    def of(cls, settings: Settings) -> Sealer | None:
        """The sealer of the settings' fleet key, or None without one (nothing is sealed)."""
        if not settings.fleet_key:
            return None
        return _cached(settings.fleet_key, secret_name_set(settings.secret_arg_names))

    def seal(self, value: Any, *, keep_sealed: bool = True) -> Any:
        """`value` with every secret-named value sealed. Sealed ones are kept as they are,
        unless `keep_sealed` is False: then a value shaped like a sealed one is sealed like
        any other, so opening it gives back that shape, never what its token holds (for
        what a tool wrote: its snapshot came opened, so a sealed shape there is not ours)."""
        # Scalars and dicts checked first, by their own types: a walk over a call's state
        # is mostly those, and an ABC's isinstance costs several times more.
        if isinstance(value, JSON_SCALARS):
            return value
        if isinstance(value, (dict, Mapping)):
            return {k: self._sealed_item(k, v, keep_sealed) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.seal(v, keep_sealed=keep_sealed) for v in value]
        return value

    def unseal(self, value: Any) -> Any:
        """`value` with the sealed values under secret-named keys opened (where `seal` puts
        them; one found anywhere else is not ours and stays as it is); SealError when one
        does not decrypt."""
        return _opened(value, self._open, self._secrets)

    def _sealed_item(self, key: Any, value: Any, keep_sealed: bool) -> Any:
        if is_secret_name(key, self._secrets):
            if keep_sealed and is_sealed(value):
                return value
            token = self._fernet.encrypt(json.dumps(value).encode()).decode()
            return {SEALED: token}
        return self.seal(value, keep_sealed=keep_sealed)

    def _open(self, token: str) -> Any:
        try:
            return json.loads(self._fernet.decrypt(token))
        except (InvalidToken, ValueError) as exc:
            raise SealError(
                "a sealed secret does not decrypt with this TOOLFLEET_FLEET_KEY: give the "
                "orchestrators and workers of one fleet the same key"
            ) from exc


def _verbatim_in_json(name: str) -> bool:
    """Whether JSON writes `name` as it is: no quote, backslash or control character."""
    return not any(c in '"\\' or ord(c) < 0x20 for c in name)


# The sealed marker's key as JSON writes it without escapes.
_SEALED_KEY_JSON = f'"{SEALED}"'


def may_hold_sealed(text: str | bytes) -> bool:
    """Whether the JSON `text` may hold a sealed value: it names the `$sealed` key, or has
    a `\\u` escape (any key may be spelled with them). False: `unseal` of what it parses to
    would find nothing to open, and walking it can be skipped."""
    if isinstance(text, bytes):
        return _SEALED_KEY_JSON.encode() in text or b"\\u" in text
    return _SEALED_KEY_JSON in text or "\\u" in text


def unseal(
    value: Any, sealer: Sealer | None, secret_names: Iterable[str] = DEFAULT_SECRET_NAMES
) -> Any:
    """`value` with its sealed values opened by `sealer`; SealError if one does not open
    (or, without a sealer, a sealed value sits under one of `secret_names`)."""
    if sealer is not None:
        return sealer.unseal(value)
    return _opened(value, _no_key, secret_name_set(secret_names))


def _no_key(token: str) -> Any:
    raise SealError(
        "a sealed secret arrived but TOOLFLEET_FLEET_KEY is not set here: set it to the "
        "fleet's key, the same as the orchestrator's"
    )


def _opened(value: Any, open_token: Callable[[str], Any], secrets: frozenset[str]) -> Any:
    if isinstance(value, Mapping):
        return {
            k: (
                v  # most values: no ABC check
                if type(v) in JSON_SCALARS
                else open_token(v[SEALED])
                if is_sealed(v) and is_secret_name(k, secrets)
                else _opened(v, open_token, secrets)
            )
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [v if type(v) in JSON_SCALARS else _opened(v, open_token, secrets) for v in value]
    return value


@lru_cache(maxsize=8)
def _cached(fleet_key: str, secrets: frozenset[str]) -> Sealer:
    # Deriving the key per message would cost an HKDF run each time.
    return Sealer(fleet_key, secrets)


def warn_without_fleet_key(settings: Settings) -> None:
    """Log once per start that secrets travel in clear without a fleet key."""
    if not settings.fleet_key:
        log.warning(
            "TOOLFLEET_FLEET_KEY is not set: values of secret-named arguments, results and "
            "state (%s) travel in clear in task messages and results streams, and state's "
            "are stored in clear in Redis; set the same TOOLFLEET_FLEET_KEY on the "
            "orchestrators and workers to seal them",
            ",".join(settings.secret_arg_names),
        )
