"""What is kept per app and user (artifacts, credentials, user state, the lists of
sessions and of sessions in memory) is keyed by percent-encoded parts: no id a program
or a token may hold (a ":", a "/", a session named "user") makes one user's keys
another's, nor a session's the user's own."""

from __future__ import annotations

import fakeredis
from cryptography.fernet import Fernet
from google.genai import types

from toolfleet.shared.artifacts import ArtifactStore
from toolfleet.shared.auth import AuthConfig, CredentialStore
from toolfleet.shared.keys import Keys, scope_key, session_key

KEYS = Keys("t")


def test_a_scope_is_its_parts_encoded_and_a_session_key_is_one() -> None:
    assert scope_key("app", "alice:s1") != scope_key("app", "alice", "s1")
    assert scope_key("app", "a/b") != scope_key("app", "a", "b")
    assert scope_key("app", "u", "s") == session_key("app", "u", "s")
    assert ":" not in scope_key("a:b", "c:d", "e:f")


def test_one_users_artifacts_are_not_anothers_whatever_their_ids_hold() -> None:
    store = ArtifactStore(fakeredis.FakeRedis(), KEYS)
    store.save("app", "alice", "s1", "x:secret.txt", types.Part(text="alice's"))
    store.save("app", "alice", "s1", "user:notes.txt", types.Part(text="alice's own"))
    # A user whose id holds alice's user and session ids finds none of them.
    assert store.load("app", "alice:s1", "x", "secret.txt") is None
    assert store.list("app", "alice:s1", "x") == []
    assert store.list("app", "alice", "s2") == ["user:notes.txt"]  # hers, in any session
    loaded = store.load("app", "alice", "s1", "x:secret.txt")
    assert loaded is not None and loaded.text == "alice's"


def test_a_session_named_user_keeps_its_own_artifacts() -> None:
    store = ArtifactStore(fakeredis.FakeRedis(), KEYS)
    store.save("app", "bob", "user", "report", types.Part(text="the session's"))
    store.save("app", "bob", "s2", "user:report", types.Part(text="bob's own"))
    assert store.list("app", "bob", "s3") == ["user:report"]  # not the session's report
    session_report = store.load("app", "bob", "user", "report")
    assert session_report is not None and session_report.text == "the session's"


def test_one_users_credential_is_not_anothers_whatever_their_ids_hold() -> None:
    store = CredentialStore(fakeredis.FakeRedis(), KEYS, Fernet.generate_key().decode())
    store.put("app", "u", AuthConfig(key="x:k"), "u's token")
    assert store.get("app", "u:x", AuthConfig(key="k")) is None
    assert store.get("app", "u", AuthConfig(key="x:k")) == "u's token"


def test_a_users_state_sessions_and_memory_are_theirs_whatever_the_ids_hold() -> None:
    # User "b:c" of app "a" is not user "c" of app "a:b" (a program names its apps).
    for of in (KEYS.user_state, KEYS.user_sessions, KEYS.memory_sessions):
        assert of("a", "b:c") != of("a:b", "c")
        assert of("a", "b/c") != of("a/b", "c")
