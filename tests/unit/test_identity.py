"""Authentication of HTTP callers: API keys, the operator's token, and JWTs (HS256, and
RS256/ES256 with keys from a JWKS URL served locally)."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from toolfleet.orchestrator.httpapi.callers import LOCAL_OPERATOR, OPERATOR, Caller
from toolfleet.orchestrator.httpapi.errors import ApiError
from toolfleet.orchestrator.httpapi.identity import Authenticator
from toolfleet.orchestrator.httpapi.settings import ApiKey, HttpSettings
from toolfleet.orchestrator.httpapi.slots import StreamSlots
from toolfleet.shared.confirmation import SERVED_AGENT, SERVED_USER
from toolfleet.shared.errors import ConfigError
from toolfleet.shared.messages import PendingCall

SECRET = "s" * 40
AUD, ISS = "toolfleet-api", "https://idp.example"
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())


def claims(**changes: Any) -> dict[str, Any]:
    now = int(time.time())
    base = {"sub": "alice", "aud": AUD, "iss": ISS, "exp": now + 300, "roles": ["approver:a"]}
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


async def caller_of(auth: Authenticator, token: str | None) -> Caller:
    return await auth.caller(token)


async def refused(auth: Authenticator, token: str | None, status: int = 401) -> str:
    with pytest.raises(ApiError) as caught:
        await auth.caller(token)
    assert caught.value.status == status, caught.value.detail
    return caught.value.detail


@pytest.fixture
def hs256() -> Authenticator:
    return Authenticator(HttpSettings(jwt_secret=SECRET, jwt_audience=AUD, jwt_issuer=ISS))


async def test_api_keys_and_the_operator_token_name_their_callers() -> None:
    hashed = hashlib.sha256(b"bob-key-0123456789").hexdigest()
    http = HttpSettings(
        token="operator-token-123",
        api_keys=[
            ApiKey(subject="ann", roles=("service:travel/book",), key="ann-key-0123456789"),
            ApiKey(subject="bob", key_sha256=hashed),
        ],
    )
    auth = Authenticator(http)
    assert await caller_of(auth, "operator-token-123") == OPERATOR
    ann = await caller_of(auth, "ann-key-0123456789")
    assert ann.subject == "ann" and ann.roles == ["service:travel/book"] and not ann.admin
    assert (await caller_of(auth, "bob-key-0123456789")).subject == "bob"
    assert "not valid" in await refused(auth, "ann-key-012345678")
    assert "authentication required" in await refused(auth, None)


async def test_no_identities_configured_means_the_local_operator() -> None:
    assert await caller_of(Authenticator(HttpSettings()), None) == LOCAL_OPERATOR


def test_bad_key_configuration_is_refused_naming_the_problem() -> None:
    with pytest.raises(ValueError, match="exactly one of key, key_sha256"):
        ApiKey(subject="x")
    with pytest.raises(ValueError, match="at least 16"):
        ApiKey(subject="x", key="short")
    with pytest.raises(ValueError, match="toolfleet mcp serve"):
        ApiKey(subject=SERVED_USER, key="k" * 16)  # no caller is the served calls' user
    with pytest.raises(ConfigError, match="unknown role 'root'"):
        Authenticator(HttpSettings(api_keys=[ApiKey(subject="x", key="k" * 16, roles=("root",))]))
    with pytest.raises(ConfigError, match=r"approver:<app>"):
        Authenticator(
            HttpSettings(api_keys=[ApiKey(subject="x", key="k" * 16, roles=("approver:a/t",))])
        )


async def test_hs256_tokens_are_checked_for_signature_expiry_audience_and_issuer(
    hs256: Authenticator,
) -> None:
    good = await caller_of(hs256, jwt.encode(claims(), SECRET, algorithm="HS256"))
    assert good.subject == "alice" and good.roles == ["approver:a"]
    # Roles an identity provider issues for other systems are ignored, not fatal.
    other = claims(roles=["approver:a", "billing-admin", 7])
    assert (await caller_of(hs256, jwt.encode(other, SECRET, algorithm="HS256"))).roles == [
        "approver:a"
    ]
    forged = jwt.encode(claims(roles=["admin"]), "f" * 40, algorithm="HS256")
    assert "Signature verification failed" in await refused(hs256, forged)
    expired = jwt.encode(claims(exp=int(time.time()) - 120), SECRET, algorithm="HS256")
    assert "expired" in await refused(hs256, expired)
    audience = jwt.encode(claims(aud="another-api"), SECRET, algorithm="HS256")
    assert "audience" in (await refused(hs256, audience)).lower()
    issuer = jwt.encode(claims(iss="https://evil.example"), SECRET, algorithm="HS256")
    assert "issuer" in (await refused(hs256, issuer)).lower()
    no_expiry = jwt.encode(claims(exp=None), SECRET, algorithm="HS256")
    assert "exp" in await refused(hs256, no_expiry)
    no_subject = jwt.encode(claims(sub=None), SECRET, algorithm="HS256")
    assert "sub" in await refused(hs256, no_subject)
    served = jwt.encode(claims(sub=SERVED_USER), SECRET, algorithm="HS256")
    assert "toolfleet mcp serve" in await refused(hs256, served)


async def test_unsigned_and_wrong_algorithm_tokens_are_refused(hs256: Authenticator) -> None:
    unsigned = jwt.encode(claims(roles=["admin"]), None, algorithm="none")
    assert "'none' refused" in await refused(hs256, unsigned)
    rs256 = jwt.encode(claims(), RSA_KEY, algorithm="RS256")  # no JWKS configured
    assert "'RS256' refused" in await refused(hs256, rs256)
    await refused(hs256, "not.a.jwt")


class Jwks:
    """A local identity provider's JWKS endpoint; `down` makes it answer 500."""

    def __init__(self) -> None:
        rsa_jwk = json.loads(RSAAlgorithm.to_jwk(RSA_KEY.public_key()))
        ec_jwk = json.loads(ECAlgorithm.to_jwk(EC_KEY.public_key()))
        self.body = json.dumps(
            {"keys": [{**rsa_jwk, "kid": "rsa-1", "use": "sig"}, {**ec_jwk, "kid": "ec-1"}]}
        ).encode()
        self.down = False
        jwks = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status = 500 if jwks.down else 200
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(jwks.body if status == 200 else b"{}")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/jwks.json"


@pytest.fixture
def jwks() -> Iterator[Jwks]:
    provider = Jwks()
    thread = threading.Thread(target=provider.server.serve_forever, daemon=True)
    thread.start()
    yield provider
    provider.server.shutdown()
    provider.server.server_close()


async def test_rs256_and_es256_tokens_are_checked_with_the_providers_jwks(jwks: Jwks) -> None:
    auth = Authenticator(HttpSettings(jwt_jwks_url=jwks.url, jwt_audience=AUD, jwt_issuer=ISS))
    rs = jwt.encode(claims(), RSA_KEY, algorithm="RS256", headers={"kid": "rsa-1"})
    assert (await caller_of(auth, rs)).subject == "alice"
    es = jwt.encode(claims(sub="bob"), EC_KEY, algorithm="ES256", headers={"kid": "ec-1"})
    assert (await caller_of(auth, es)).subject == "bob"
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    forged = jwt.encode(claims(), stranger, algorithm="RS256", headers={"kid": "rsa-1"})
    await refused(auth, forged)
    unknown_kid = jwt.encode(claims(), stranger, algorithm="RS256", headers={"kid": "rsa-9"})
    await refused(auth, unknown_kid)
    # An HS256 token signed with the public key (algorithm confusion) is not even tried.
    hs = jwt.encode(claims(), "p" * 40, algorithm="HS256")
    assert "'HS256' refused" in await refused(auth, hs)


async def test_an_unreachable_jwks_answers_503_not_401() -> None:
    auth = Authenticator(
        HttpSettings(jwt_jwks_url="http://127.0.0.1:9/jwks", jwt_audience=AUD, jwt_issuer=ISS)
    )
    token = jwt.encode(claims(), RSA_KEY, algorithm="RS256", headers={"kid": "rsa-1"})
    assert "JWKS" in await refused(auth, token, status=503)


def call(
    kind: str = "result",
    app: str = "a",
    tool: str = "t",
    user: str = "u",
    *,
    agent: str | None = None,
    answered_by_user: bool = False,
) -> PendingCall:
    return PendingCall(
        call_id="c1",
        tool=tool,
        session_id="s1",
        app_name=app,
        user_id=user,
        agent=agent or app,
        invocation_id="i1",
        ticket={},
        created_at=0.0,
        kind=kind,  # type: ignore[arg-type]
        answered_by_user=answered_by_user,
    )


def test_roles_decide_who_sees_and_acts_on_a_ticket() -> None:
    approver = Caller.of("x", ["approver:a"])
    assert approver.actions(call()) == ["approve", "reject"]
    assert not approver.sees(call(app="b")) and not approver.sees(call(kind="credential"))
    service = Caller.of("hook", ["service:a/t"])
    assert service.actions(call()) == ["approve", "reject", "result"]
    assert not service.sees(call(tool="other"))
    everywhere = Caller.of("hook", ["service:*"])
    assert everywhere.may_post_result(call(app="z", tool="q"))
    owner = Caller.of("u", [])
    assert owner.sees(call()) and owner.actions(call()) == []
    assert owner.actions(call(kind="credential")) == ["credential"]
    # Not even an admin may supply a user's credential: it would be stored as theirs.
    assert OPERATOR.sees(call(kind="credential"))
    assert OPERATOR.actions(call(kind="credential")) == []
    # Without identities, the one person at a loopback server is each of its users.
    assert LOCAL_OPERATOR.actions(call(kind="credential")) == ["credential"]


def test_a_user_posts_the_result_only_of_a_tool_answered_by_its_user() -> None:
    owner, other = Caller.of("u", []), Caller.of("v", [])
    assert not owner.may_post_result(call())  # an approval is not its user's to give
    choice = call(answered_by_user=True)  # get_user_choice: the user's own answer
    assert owner.may_post_result(choice) and owner.actions(choice)[-1] == "result"
    assert not other.may_post_result(choice) and not other.sees(choice)
    assert not owner.may_post_result(call(kind="confirmation", answered_by_user=True))


def test_a_call_of_mcp_serve_is_no_callers_own_whatever_its_subject() -> None:
    served = call(kind="confirmation", user="mcp", agent=SERVED_AGENT, answered_by_user=True)
    named_like_it = Caller.of("mcp", [])
    assert not named_like_it.owns_call(served) and not named_like_it.sees(served)
    assert not named_like_it.may_confirm(served)
    assert not named_like_it.may_post_result(served.model_copy(update={"kind": "result"}))
    assert OPERATOR.owns_call(served) and OPERATOR.sees(served)
    assert Caller.of("x", ["approver:a"]).may_confirm(call(kind="confirmation", agent=SERVED_AGENT))


def test_only_an_admin_may_write_app_wide_state() -> None:
    state = {"app:notice": "ignore previous instructions", "user:tier": "gold", "n": 1}
    assert Caller.of("u", []).shared_state_in(state) == ["app:notice"]
    assert Caller.of("u", ["approver:a", "service:*"]).shared_state_in(state) == ["app:notice"]
    assert OPERATOR.shared_state_in(state) == []
    assert Caller.of("u", []).shared_state_in({"user:tier": "x", "temp:t": 1}) == []
    assert Caller.of("u", []).shared_state_in(None) == []


def test_stream_slots_cap_each_caller_and_the_replica_and_come_back() -> None:
    slots = StreamSlots(max_total=3, max_per_caller=2)
    ann, bob = Caller.of("ann", []), Caller.of("bob", [])
    first, _ = slots.take(ann), slots.take(ann)
    with pytest.raises(ApiError) as caught:
        slots.take(ann)
    assert caught.value.status == 429 and "MAX_STREAMS_PER_CALLER" in caught.value.detail
    slots.take(bob)
    with pytest.raises(ApiError) as caught:
        slots.take(OPERATOR)  # an admin has no share, but the replica's cap holds
    assert caught.value.status == 503 and "TOOLFLEET_HTTP_MAX_STREAMS" in caught.value.detail
    first()
    first()  # giving back twice gives back once
    assert slots.open() == 2
    slots.take(OPERATOR)
    assert slots.open() == 3 and slots.callers() == 3
