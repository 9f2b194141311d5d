"""A call waiting for a user's credential, for the tests of credential answers."""

from __future__ import annotations

import time

import fakeredis

from tests.unit.test_posted_answers import KEYS
from toolfleet.shared.auth import AuthConfig, CredentialStore
from toolfleet.shared.auth import new_credential_key as new_fernet_key
from toolfleet.shared.completions import Completions
from toolfleet.shared.messages import PendingCall

GITHUB = AuthConfig(key="github", description="A GitHub token")
SLACK = AuthConfig(key="slack", description="A Slack token")


def waiting(completions: Completions, config: AuthConfig, asked_again: int = 0) -> PendingCall:
    """Call `c1` of user `u`, waiting for the credential `config` (request `asked_again`)."""
    call = PendingCall(
        call_id="c1", tool="t", session_id="s", app_name="app", user_id="u", agent="a",
        invocation_id="i", ticket=config.model_dump(mode="json"), created_at=time.time(),
        kind="credential", asked_again=asked_again,
    )  # fmt: skip
    completions.register(call)
    return call


def stores(client: fakeredis.FakeRedis) -> tuple[Completions, CredentialStore]:
    """A completions client and a credential store (with a key of its own) on `client`."""
    return Completions(client, KEYS), CredentialStore(client, KEYS, new_fernet_key())
