"""Draw the cost figure (bench/cost.py) from its JSON: six panels, toolfleet's value at
each size beside its reference. Needs matplotlib (in the `bench` extra; into the dev
virtualenv alone: `pip install matplotlib`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

KIB, MIB = 1024, 1024 * 1024


def panels(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Per panel: title, unit, the size labels, toolfleet's values, the references and
    the reference's name (all from the table's data, nothing measured here)."""
    data = result["tables"]["cost"]["data"]
    sessions, tickets, applies = data["sessions"], data["tickets"], data["completions"]
    base = data["replicas_base"]

    def per(point: dict[str, Any], units: float) -> float:
        # As the table counts it (bench.cost.Point.per_unit): the run's keys' MEMORY USAGE.
        return float(point["memory"]["keys"] - point["base"]) / units

    session_sizes = [f"{p['size']:,} sessions" for p in sessions]
    probes = sorted((int(n), s) for n, s in data["http_turn_s"].items())
    return [
        {
            "title": "Redis per session",
            "unit": "KiB",
            "sizes": session_sizes,
            "values": [per(p, p["size"]) / KIB for p in sessions],
            "refs": [p["extra"]["raw_bytes_per_session"] / KIB for p in sessions],
            "ref_name": "JSON stored per session",
        },
        {
            "title": "Redis per event",
            "unit": "bytes",
            "sizes": session_sizes,
            "values": [per(p, p["extra"]["events"]) for p in sessions],
            "refs": [p["extra"]["raw_bytes_per_event"] for p in sessions],
            "ref_name": "JSON stored per event",
        },
        {
            "title": "Redis per pending ticket",
            "unit": "bytes",
            "sizes": [f"{p['size']:,} tickets" for p in tickets],
            "values": [per(p, p["size"]) for p in tickets],
            "refs": [data["celery_reference"]["memory_per_task"]] * len(tickets),
            "ref_name": "Celery result backend per task",
        },
        {
            "title": "Replica RSS per 1,000 sessions (2 replicas)",
            "unit": "MiB",
            "sizes": session_sizes,
            "values": [
                (p["replicas"]["VmRSS"] - base["VmRSS"]) / MIB / (p["size"] / 1000)
                for p in sessions
            ],
            "refs": [p["extra"]["raw_bytes_per_session"] * 1000 / MIB for p in sessions],
            "ref_name": "their JSON held in memory",
        },
        {
            "title": f"Apply {applies[0]['completions']:,} completions (posted → resumed)",
            "unit": "s",
            "sizes": [f"{a['pending']:,} pending" for a in applies],
            "values": [a["settled_s"] for a in applies],
            "refs": [a["floor_s"] for a in applies],
            "ref_name": "Redis stream floor",
        },
        {
            "title": "One HTTP turn, by tickets pending",
            "unit": "ms",
            "sizes": [f"{int(n):,} pending" for n, _ in probes],
            "values": [s * 1000 for _, s in probes],
            "refs": [probes[0][1] * 1000] * len(probes),
            "ref_name": "none pending",
        },
    ]


def _label(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def plot(result: dict[str, Any], path: Path) -> None:
    """Write the figure as a PNG at `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    found = panels(result)
    figure, axes = plt.subplots(2, 3, figsize=(15, 8.5), dpi=100)
    for axis, panel in zip(axes.flat, found, strict=True):
        positions = list(range(len(panel["sizes"])))
        width = 0.38
        ours = axis.bar(
            [x - width / 2 for x in positions], panel["values"], width, label="toolfleet"
        )
        refs = axis.bar(
            [x + width / 2 for x in positions],
            panel["refs"],
            width,
            label=panel["ref_name"],
            color="#bbbbbb",
        )
        for bars in (ours, refs):
            axis.bar_label(bars, fmt=_label, fontsize=8, padding=2)
        axis.set_xticks(positions, panel["sizes"])
        title = panel["title"]
        if len(panel["values"]) > 1 and panel["values"][0]:
            growth = panel["values"][-1] / panel["values"][0]
            title += f"\nx{growth:.2f} from {panel['sizes'][0]} to {panel['sizes'][-1]}"
        axis.set_title(title, fontsize=10)
        axis.set_ylabel(panel["unit"])
        top = max([*panel["values"], *panel["refs"]])
        axis.set_ylim(0, top * 1.4)  # room for the legend above the bars
        axis.legend(fontsize=8, loc="upper center", ncol=2, frameon=False)
    machine = result.get("machine", {})
    figure.suptitle(
        "toolfleet: cost as the work grows (two replicas"
        + (", smoke sizes" if result.get("smoke") else "")
        + f"; {machine.get('nproc', '?')} cores, {machine.get('date', '')})",
        fontsize=12,
    )
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
