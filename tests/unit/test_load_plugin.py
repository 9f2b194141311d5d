"""`--plugin module:attribute` names a BasePlugin instance, or fails saying why."""

from __future__ import annotations

import pytest

from toolfleet.orchestrator.cli.launch import load_plugin
from toolfleet.orchestrator.plugins import ReflectAndRetryToolPlugin
from toolfleet.shared.errors import ToolfleetError

retry = ReflectAndRetryToolPlugin(max_retries=1)
not_a_plugin = object()


def test_a_plugin_instance_is_loaded() -> None:
    assert load_plugin("tests.unit.test_load_plugin:retry") is retry


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("tests.unit.test_load_plugin", "expected module:attribute"),
        ("tests.unit.nowhere:retry", "cannot import tests.unit.nowhere"),
        ("tests.unit.test_load_plugin:not_a_plugin", "is not a BasePlugin instance"),
    ],
)
def test_a_wrong_spec_says_what_is_wrong(spec: str, problem: str) -> None:
    with pytest.raises(ToolfleetError, match=problem):
        load_plugin(spec)
