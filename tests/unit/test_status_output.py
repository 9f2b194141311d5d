"""`toolfleet status` as text: pending tickets counted by age, only the oldest listed."""

from __future__ import annotations

from typing import Any

import pytest

from toolfleet.orchestrator.cli.status import _print


def state(total: int, shown: int) -> dict[str, Any]:
    return {
        "redis": "redis://r",
        "workers": [],
        "pools": [],
        "pending_total": total,
        "pending_by_age": {"<1m": 0, "1m-1h": total - 1, "1h-1d": 0, ">1d": 1},
        "pending": [
            {"call_id": f"c{n}", "tool": "approve", "age_s": 90_000.0 - n} for n in range(shown)
        ],
    }


def test_many_tickets_are_counted_by_age_and_only_the_oldest_listed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _print(state(100_000, 20))
    out = capsys.readouterr().out
    assert "pending tickets: 100000 (99999 1m-1h, 1 >1d old)" in out
    assert "the 20 oldest (all: toolfleet tickets list):" in out
    assert out.count(" approve ") == 20


def test_a_few_tickets_are_all_listed_without_a_note(capsys: pytest.CaptureFixture[str]) -> None:
    _print(state(2, 2))
    out = capsys.readouterr().out
    assert "pending tickets: 2 (1 1m-1h, 1 >1d old)" in out
    assert "oldest" not in out
    assert out.count(" approve ") == 2
