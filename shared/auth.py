"""Tool authentication: what a tool needs (AuthConfig) and where supplied credentials live.

Credentials are encrypted (Fernet, key in TOOLFLEET_CREDENTIAL_KEY) and stored per
user, never in session events, task messages, logs or model contents. A worker reads
them when the tool asks with `tool_context.get_auth_response(auth_config)`.
"""

from __future__ import annotations

from typing import Literal

import redis
from cryptography.fernet import Fernet, InvalidToken
from pydantic import BaseModel, ConfigDict, Field

from toolfleet.shared.errors import ConfigError
from toolfleet.shared.keys import Keys

# The longest credential taken (a token, a key): one stored per user, never unbounded.
MAX_CREDENTIAL_CHARS = 8192


class AuthConfig(BaseModel):
    """What credential a tool needs; shown to the person asked to supply it.

    Attributes:
        key: Names the credential, e.g. `"weather_api"`; one stored per app and user.
        scheme: The credential's kind: `"bearer"` (the default), `"api_key"`, `"oauth2"`;
            remote toolsets send an api key in its own header, the others as a bearer token.
        description: Shown to the person asked for the credential.
        authorization_url: OAuth2: where to log in; None for other schemes.
        scopes: OAuth2 scopes; empty by default.
        ttl_s: How long a supplied credential lasts; None: until deleted.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str = Field(description="Names the credential, e.g. 'weather_api'; one per user.")
    scheme: Literal["bearer", "api_key", "oauth2"] = "bearer"
    description: str = ""
    authorization_url: str | None = Field(default=None, description="OAuth2: where to log in.")
    scopes: list[str] = Field(default_factory=list, description="OAuth2 scopes.")
    ttl_s: float | None = Field(default=None, description="How long a supplied credential lasts.")


def new_credential_key() -> str:
    """A fresh value for TOOLFLEET_CREDENTIAL_KEY."""
    return Fernet.generate_key().decode()


class CredentialStore:
    """Users' credentials in Redis, Fernet-encrypted, one per app, user and AuthConfig key.

    Without `secret_key`, storing or decrypting a credential raises ConfigError.
    """

    def __init__(self, client: redis.Redis, keys: Keys, secret_key: str | None) -> None:
        self._redis = client
        self._keys = keys
        self._fernet = _fernet(secret_key)

    def put(self, app: str, user: str, config: AuthConfig, credential: str) -> None:
        """Encrypt and store `credential`; it expires after `config.ttl_s` when that is set."""
        token = self._need().encrypt(credential.encode())
        ttl_ms = int(config.ttl_s * 1000) if config.ttl_s else None
        self._redis.set(self._keys.credential(app, user, config.key), token, px=ttl_ms)

    def get(self, app: str, user: str, config: AuthConfig) -> str | None:
        """The decrypted credential; None if none is stored or another key encrypted it."""
        raw = self._redis.get(self._keys.credential(app, user, config.key))
        if raw is None:
            return None
        try:
            return self._need().decrypt(raw).decode()
        except InvalidToken:
            return None  # encrypted with another key: ask the user again

    def forget(self, app: str, user: str, config: AuthConfig) -> None:
        """Delete the stored credential, so that the tool's next run asks the user again."""
        self._redis.delete(self._keys.credential(app, user, config.key))

    def _need(self) -> Fernet:
        if self._fernet is None:
            raise ConfigError(
                "TOOLFLEET_CREDENTIAL_KEY is not set: tools that use credentials need it on "
                f"the orchestrator and every worker; generate one with: python -c "
                f"'from toolfleet.shared.auth import new_credential_key as k; print(k())'  (e.g. "
                f"{new_credential_key()[:6]}...)"
            )
        return self._fernet


def _fernet(secret_key: str | None) -> Fernet | None:
    if not secret_key:
        return None
    try:
        return Fernet(secret_key.encode())
    except ValueError as exc:
        raise ConfigError(f"TOOLFLEET_CREDENTIAL_KEY is not a valid Fernet key: {exc}") from exc
