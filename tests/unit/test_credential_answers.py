"""A user's credential is stored only for the request it answers: the one the call
makes now (its `asked_again`) and the AuthConfig key it asks for. A late answer, one
naming another key, or an empty or oversized one is refused, and nothing is stored."""

from __future__ import annotations

import json
from typing import Any

import fakeredis
import pytest

from tests.unit.credential_cases import GITHUB, SLACK, stores, waiting
from tests.unit.test_posted_answers import KEYS, dead_letters, posted
from toolfleet.shared.auth import MAX_CREDENTIAL_CHARS
from toolfleet.shared.errors import AwaitingCredentialError, InvalidCompletionError
from toolfleet.shared.messages import COMPLETION_FIELD, Completion


def posted_completions(client: fakeredis.FakeRedis) -> list[Completion]:
    entries: Any = client.xrange(KEYS.completions("app"))
    return [Completion.model_validate_json(f[COMPLETION_FIELD.encode()]) for _, f in entries]


def test_a_credential_is_stored_only_for_the_request_it_names() -> None:
    client = fakeredis.FakeRedis()
    completions, store = stores(client)
    # The call was given a GitHub token, ran again, and now asks for a Slack one.
    waiting(completions, SLACK, asked_again=1)

    with pytest.raises(
        AwaitingCredentialError, match=r"asks for the credential 'slack', not 'github'"
    ):
        completions.supply_credential("c1", "gh-late", store, credential_key="github")
    with pytest.raises(AwaitingCredentialError, match=r"asked again since .*request 0, now 1"):
        completions.supply_credential("c1", "gh-late", store, asked=0, credential_key="slack")
    assert store.get("app", "u", SLACK) is None and store.get("app", "u", GITHUB) is None
    assert posted(client) == 0
    reasons = [reason for reason, _ in dead_letters(client)]
    assert len(reasons) == 2 and all("nothing was stored" in r for r in reasons)
    assert "gh-late" not in json.dumps(dead_letters(client))  # the credential is not kept

    completions.supply_credential("c1", "sl-1", store, asked=1, credential_key="slack")
    assert store.get("app", "u", SLACK) == "sl-1" and store.get("app", "u", GITHUB) is None
    # The completion names its request: the call asking again before it is applied
    # refuses it there.
    (completion,) = posted_completions(client)
    assert completion.kind == "credential" and completion.asked_again == 1


@pytest.mark.parametrize(
    ("credential", "why"),
    [
        ("", f"1 to {MAX_CREDENTIAL_CHARS} characters, not 0"),
        ("x" * (MAX_CREDENTIAL_CHARS + 1), f"1 to {MAX_CREDENTIAL_CHARS} characters"),
        ("x" * 200 + "\ud800", "not Unicode text"),
    ],
)
def test_an_empty_oversized_or_unencodable_credential_is_refused_and_not_kept(
    credential: str, why: str
) -> None:
    client = fakeredis.FakeRedis()
    completions, store = stores(client)
    waiting(completions, SLACK)
    with pytest.raises(InvalidCompletionError, match=why):
        completions.supply_credential("c1", credential, store)
    assert store.get("app", "u", SLACK) is None and posted(client) == 0
    ((_, kept),) = dead_letters(client)
    assert kept["kind"] == "credential" and "x" * 100 not in json.dumps(kept)
    completions.supply_credential("c1", "x" * MAX_CREDENTIAL_CHARS, store)  # the limit itself
    assert store.get("app", "u", SLACK) == "x" * MAX_CREDENTIAL_CHARS
