"""One turn's state writes merged as if its calls had run one after another on one state
(ADK's calls of a turn share one): extended lists and changed dict keys are kept from
every call, any other write is the later call's."""

from __future__ import annotations

from toolfleet.orchestrator.sessions.events import merge_deltas


def test_calls_that_extend_one_list_keep_every_item_in_call_order() -> None:
    calls = [{"visits": ["Louvre"]}, {"visits": ["Prado"]}, {"visits": ["Uffizi"]}]
    assert merge_deltas(calls) == {"visits": ["Louvre", "Prado", "Uffizi"]}
    seen = {"visits": ["Tate"]}
    calls = [{"visits": ["Tate", "Louvre"]}, {"visits": ["Tate", "Prado"]}]
    assert merge_deltas(calls, seen) == {"visits": ["Tate", "Louvre", "Prado"]}


def test_a_list_written_afresh_replaces_the_earlier_calls() -> None:
    seen = {"cart": ["old"]}
    assert merge_deltas([{"cart": ["a"]}, {"cart": ["b"]}], seen) == {"cart": ["b"]}


def test_calls_that_change_keys_of_one_dict_keep_each_change() -> None:
    seen = {"prefs": {"theme": "dark", "lang": "en", "old": 1}}
    calls = [
        {"prefs": {"theme": "light", "lang": "en", "old": 1}},
        {"prefs": {"theme": "dark", "lang": "fr"}},  # changes lang, drops old
        {"prefs": {"theme": "dark", "lang": "en", "old": 1, "tz": "UTC"}},
    ]
    assert merge_deltas(calls, seen) == {"prefs": {"theme": "light", "lang": "fr", "tz": "UTC"}}


def test_other_writes_are_the_later_calls_and_other_keys_are_kept() -> None:
    calls = [{"n": 1, "a": "x"}, {"n": 2}, {"b": [1]}]
    assert merge_deltas(calls, {"n": 0}) == {"n": 2, "a": "x", "b": [1]}
    assert merge_deltas([{"k": [1]}, {"k": "text"}]) == {"k": "text"}
    assert merge_deltas([]) == {}
