"""Tables: one per figure, printed as markdown and written as JSON."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

Cell = str | float | int | None


@dataclass
class Table:
    key: str
    title: str
    columns: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    goal: str = ""
    met: bool | None = None  # None: the figure has no goal, or it could not be measured
    notes: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)  # every measured number, for JSON
    skipped: str | None = None  # why the table (or part of it) could not be measured

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def to_markdown(self) -> str:
        lines = [f"### {self.title}", ""]
        lines.append("| " + " | ".join(self.columns) + " |")
        lines.append("|" + "|".join(" --- " for _ in self.columns) + "|")
        for row in self.rows:
            lines.append("| " + " | ".join(fmt(c) for c in row) + " |")
        lines.append("")
        if self.goal:
            verdict = {True: "**met**", False: "**not met**", None: "not measured"}[self.met]
            lines.append(f"Goal: {self.goal} — {verdict}.")
            lines.append("")
        if self.skipped:
            lines.append(f"Skipped: {self.skipped}")
            lines.append("")
        for note in self.notes:
            lines.append(f"- {note}")
        if self.notes:
            lines.append("")
        return "\n".join(lines)


def fmt(value: Cell) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value:  # NaN
            return "-"
        if abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        if 0 < abs(value) < 0.1:
            return f"{value:.2g}"
        return f"{value:.2f}"
    return value


def ratio(value: float, reference: float) -> float:
    return value / reference if reference else float("nan")


def machine_markdown(info: dict[str, Any], params: dict[str, Any]) -> str:
    lines = ["| machine | |", "| --- | --- |"]
    lines += [f"| {k} | {v} |" for k, v in info.items()]
    lines += ["", "Sizes: " + ", ".join(f"{k}={_short(v)}" for k, v in params.items())]
    return "\n".join(lines)


def _short(value: Any) -> str:
    if isinstance(value, Sequence) and not isinstance(value, str):
        return "/".join(str(v) for v in value)
    return str(value)
