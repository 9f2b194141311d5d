"""The cost figure's plot draws the numbers its table states (from the saved JSON, no
matplotlib needed to check them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.cost_plot import panels

SAVED = Path(__file__).resolve().parents[2] / "bench" / "figures" / "cost.json"

# Plot panel title (its start) -> the table's measure drawn there.
DRAWN = {
    "Redis per session": "Redis KiB per session",
    "Redis per event": "Redis bytes per event",
    "Redis per pending ticket": "Redis bytes per pending ticket",
    "Replica RSS per 1,000 sessions": "replica RSS MiB per 1,000 sessions, after (2 replicas)",
    "Apply ": "s to apply",
    "One HTTP turn": "s of one HTTP turn",
}


def test_each_panel_draws_the_values_and_references_of_its_table_row() -> None:
    result = json.loads(SAVED.read_text())
    rows = result["tables"]["cost"]["rows"]
    for panel in panels(result):
        (measure,) = [m for t, m in DRAWN.items() if panel["title"].startswith(t)]
        scale = 1000 if panel["unit"] == "ms" else 1  # the HTTP turn: its row is in s
        stated = [row for row in rows if str(row[0]).startswith(measure)]
        drawn = [row[2] * scale for row in stated]
        assert drawn == pytest.approx(panel["values"]), panel["title"]
        assert [row[4] * scale for row in stated] == pytest.approx(panel["refs"]), panel["title"]
