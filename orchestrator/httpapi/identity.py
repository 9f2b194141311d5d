"""Authentication: the bearer credential of a request -> its Caller, or 401.

Three forms, tried in this order:
- the operator's token (TOOLFLEET_HTTP_TOKEN): subject `operator`, role admin;
- static API keys (TOOLFLEET_HTTP_API_KEYS), each with its subject and roles;
- JWTs: HS256 with a shared secret, RS256/ES256 with keys from a JWKS URL; audience,
  issuer, expiry and subject are required and checked.
Keys and the token are compared as SHA-256 digests, every one of them, in constant time,
so neither the answer's timing nor a key's position tells how close a guess was.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
from typing import Any

import jwt

from toolfleet.orchestrator.httpapi.callers import (
    LOCAL_OPERATOR,
    OPERATOR,
    Caller,
    UnknownRoleError,
    caller_of_key,
)
from toolfleet.orchestrator.httpapi.errors import ApiError
from toolfleet.orchestrator.httpapi.settings import HttpSettings
from toolfleet.shared.confirmation import RESERVED_SUBJECT, SERVED_USER

log = logging.getLogger(__name__)

ASYMMETRIC = ("RS256", "ES256")
JWKS_TIMEOUT_S = 5.0
CHALLENGE = {"WWW-Authenticate": "Bearer"}


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


def unauthorized(detail: str) -> ApiError:
    """The 401 every failed authentication answers, with its reason."""
    return ApiError(401, detail, headers=CHALLENGE)


class Authenticator:
    """Turns a bearer credential into a Caller; built once from the HTTP settings."""

    def __init__(self, http: HttpSettings) -> None:
        self.required = http.auth_required()
        self._known: list[tuple[bytes, Caller]] = []
        if http.token is not None and http.token.get_secret_value():
            self._known.append((_digest(http.token.get_secret_value()), OPERATOR))
        for key in http.api_keys:
            digest = (
                _digest(key.key.get_secret_value())
                if key.key is not None
                else bytes.fromhex(key.key_sha256 or "")
            )
            self._known.append((digest, caller_of_key(key.subject, key.roles)))
        self._hs_secret = http.jwt_secret.get_secret_value() if http.jwt_secret else None
        self._jwks = (
            jwt.PyJWKClient(http.jwt_jwks_url, cache_keys=True, timeout=JWKS_TIMEOUT_S)
            if http.jwt_jwks_url
            else None
        )
        self._audience = http.jwt_audience
        self._issuer = http.jwt_issuer
        self._roles_claim = http.jwt_roles_claim
        self._leeway_s = http.jwt_leeway_s

    async def caller(self, credential: str | None) -> Caller:
        """The caller `credential` identifies; the operator when no identities are set up
        (the peer was checked before: loopback or a trusted proxy). ApiError 401 otherwise."""
        if not self.required:
            return LOCAL_OPERATOR
        if credential is None:
            raise unauthorized(
                "authentication required: send `Authorization: Bearer <token>` with an API key, "
                "a JWT, or the operator's token"
            )
        known = self._match(credential)
        if known is not None:
            return known
        if credential.count(".") == 2 and (self._hs_secret or self._jwks):
            return await self._from_jwt(credential)
        raise unauthorized("the bearer token is not valid")

    def _match(self, credential: str) -> Caller | None:
        digest = _digest(credential)
        found: Caller | None = None
        for known, caller in self._known:  # all of them: the time does not depend on which
            if hmac.compare_digest(digest, known):
                found = caller
        return found

    async def _from_jwt(self, token: str) -> Caller:
        try:
            algorithm = jwt.get_unverified_header(token).get("alg")
        except jwt.PyJWTError as exc:
            raise unauthorized(f"the bearer token is not a valid JWT: {exc}") from exc
        if not isinstance(algorithm, str):
            raise unauthorized("the JWT's header names no algorithm")
        key = await self._key_for(token, algorithm)
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[algorithm],
                audience=self._audience,
                issuer=self._issuer,
                leeway=self._leeway_s,
                options={"require": ["exp", "sub", "aud", "iss"]},
            )
        except jwt.PyJWTError as exc:
            raise unauthorized(f"the JWT was refused: {exc}") from exc
        return self._caller_of_claims(claims)

    async def _key_for(self, token: str, algorithm: str) -> Any:
        if algorithm == "HS256" and self._hs_secret is not None:
            return self._hs_secret
        if algorithm in ASYMMETRIC and self._jwks is not None:
            jwks = self._jwks
            try:
                return (await asyncio.to_thread(jwks.get_signing_key_from_jwt, token)).key
            except jwt.PyJWKClientConnectionError as exc:
                log.error("cannot fetch the JWKS to check a JWT: %s", exc)
                raise ApiError(503, "the identity provider's keys (JWKS) are unreachable") from exc
            except jwt.PyJWTError as exc:
                raise unauthorized(
                    f"no key of the identity provider signs this JWT: {exc}"
                ) from exc
        accepted = (["HS256"] if self._hs_secret else []) + (list(ASYMMETRIC) if self._jwks else [])
        raise unauthorized(f"JWT algorithm {algorithm!r} refused; accepted: {', '.join(accepted)}")

    def _caller_of_claims(self, claims: dict[str, Any]) -> Caller:
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            raise unauthorized("the JWT's `sub` is not a non-empty string")
        if subject == SERVED_USER:
            raise unauthorized(f"the JWT's `sub` {subject!r}: {RESERVED_SUBJECT}")
        raw_roles = claims.get(self._roles_claim, [])
        if isinstance(raw_roles, str):
            raw_roles = raw_roles.split()
        if not isinstance(raw_roles, list):
            raise unauthorized(f"the JWT's `{self._roles_claim}` claim is not a list of roles")
        roles = [r for r in raw_roles if isinstance(r, str) and _is_role(r, subject)]
        return Caller.of(subject, roles)


def _is_role(role: str, subject: str) -> bool:
    """True for a role toolfleet reads; other roles an identity provider issues are ignored."""
    try:
        Caller.of(subject, [role])
    except UnknownRoleError:
        log.debug("JWT of %s: role %r is not toolfleet's, ignored", subject, role)
        return False
    return True
