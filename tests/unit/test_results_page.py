"""bench/RESULTS.md is written from the figures' saved JSON: every figure gets a section
with its reference, its latest table (or how to produce one) and the command that reruns
it, and the committed page is exactly what its committed JSON gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import results_page, run
from bench.catalog import BY_KEY, FIGURES
from bench.report import Table, fmt

ROOT = Path(__file__).resolve().parents[2]
MACHINE = {
    "date": "2026-01-02 03:04:05 UTC",
    "nproc": 2,
    "cpu": "Test CPU",
    "memory": "4.0 GiB",
    "loadavg_at_start": "0.50 0.40 0.30",
    "python": "3.11.7",
}
SIZES = {"fanout_ks": [1, 2], "fanout_ms": 200, "mcp_calls": 400}


def fanout_table() -> Table:
    return Table(
        key="fanout",
        title="2. Fan-out: one turn of k calls of a 200 ms tool",
        columns=["slots", "k", "ideal ms (reference)", "toolfleet turn ms", "efficiency"],
        rows=[[8, 1, 200.0, 212.5, 0.941], [8, 2, 200.0, 230.25, 0.869]],
        goal="efficiency ≥ 95% whenever k ≤ slots",
        met=False,
        notes=["rounds alternate between the paths"],
        data={"seconds": 12.5},
    )


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    """A results folder holding the fan-out figure's JSON and an image for it."""
    figures = tmp_path / "figures"
    result = results_page.figure_result(fanout_table(), MACHINE, SIZES)
    results_page.save(result, "fanout", figures)
    (figures / "fanout.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    return figures


def test_every_figure_has_a_section_with_its_reference_and_rerun_command(saved: Path) -> None:
    page = results_page.render(saved, saved.parent / "RESULTS.md")
    for figure in FIGURES:
        section = page.split(f"## {results_page.heading(figure)}\n", 1)[1].split("\n## ", 1)[0]
        assert f"**Reference.** {figure.reference.split()[0]}" in section, figure.key
        assert f".venv/bin/python -m bench.run --only {figure.key}\n" in section
        if figure.key != "fanout":
            assert "**Latest result: none saved yet.**" in section, figure.key
            assert f"`figures/{figure.key}.json` does not exist" in section, figure.key
    assert page.count("## Figure ") == len(FIGURES) == len(BY_KEY)


def test_a_saved_figure_shows_its_table_machine_sizes_and_image(saved: Path) -> None:
    page = results_page.render(saved, saved.parent / "RESULTS.md")
    section = page.split("## Figure 2: Fan-out\n", 1)[1].split("\n## ", 1)[0]
    assert "none saved yet" not in section
    assert "[figures/fanout.json](figures/fanout.json)" in section
    table = fanout_table()
    assert f"### {table.title}" in section
    for row in table.rows:
        assert "| " + " | ".join(fmt(cell) for cell in row) + " |" in section
    assert "| 8 | 2 | 200 | 230 | 0.87 |" in section  # the numbers as bench.run prints them
    assert "Goal: efficiency ≥ 95% whenever k ≤ slots — **not met**." in section
    flat = " ".join(section.split())  # the prose is wrapped
    assert "Ran 2026-01-02 03:04:05 UTC on 2 cores (Test CPU, 4.0 GiB)" in flat
    assert "load average 0.50 0.40 0.30 at its start" in flat
    assert "it took 12.5 s" in flat
    assert "Sizes: `fanout_ks`=1/2, `fanout_ms`=200." in flat  # only this figure's sizes
    assert "![Fan-out](figures/fanout.png)" in section
    index = page.split("\n## ", 1)[0]
    assert "| [2. Fan-out](#figure-2-fan-out) | `fanout` |" in index
    assert "| 2026-01-02 03:04:05 UTC | not met |" in index


def test_history_links_need_the_headings_they_name(tmp_path: Path) -> None:
    figures = tmp_path / "figures"
    figures.mkdir()
    history = tmp_path / results_page.HISTORY_NAME
    headings = [f"## {f.history} (a pass)" for f in FIGURES]
    history.write_text("# History\n\n" + "\n\n".join(headings) + "\n")
    page = results_page.render(figures, tmp_path / "RESULTS.md")
    assert "[HISTORY.md](HISTORY.md)" in page
    anchor = results_page.slug(f"{BY_KEY['cost'].history} (a pass)")
    assert f"(HISTORY.md#{anchor})" in page

    history.write_text("# History\n\n## Something else\n")
    with pytest.raises(ValueError, match=r"no heading of HISTORY\.md begins with"):
        results_page.render(figures, tmp_path / "RESULTS.md")


def test_anchors_are_githubs() -> None:
    text = (
        "# Top\n\n## 5. Resume latency: completion posted → model called again\n\n"
        "```sh\n# not a heading\n```\n\n## Top\n\n### `Runner.lease` (fixed)\n"
    )
    assert results_page.anchors(text) == {
        "Top": "top",
        "5. Resume latency: completion posted → model called again": (
            "5-resume-latency-completion-posted--model-called-again"
        ),
        "`Runner.lease` (fixed)": "runnerlease-fixed",
    }
    repeated = results_page.anchors("## A b\n\n### A b!\n")
    assert repeated == {"A b": "a-b", "A b!": "a-b-1"}


def test_a_run_saves_each_figure_with_its_own_start_and_rewrites_the_page(
    tmp_path: Path,
) -> None:
    figures, page = tmp_path / "figures", tmp_path / "RESULTS.md"
    moments = {"fanout": {"date": "2026-01-02 04:00:00 UTC", "loadavg_at_start": "1.00"}}
    written = run.save_figures([fanout_table()], MACHINE, moments, SIZES, figures, page)
    assert written == [figures / "fanout.json", page]
    saved = json.loads((figures / "fanout.json").read_text())
    assert saved["machine"]["date"] == "2026-01-02 04:00:00 UTC"
    assert saved["machine"]["cpu"] == "Test CPU"
    assert saved["tables"]["fanout"]["rows"] == fanout_table().rows
    assert saved["seconds"] == 12.5 and saved["smoke"] is False
    assert page.read_text() == results_page.render(figures, page)
    assert "2026-01-02 04:00:00 UTC" in page.read_text()


def test_results_only_rewrites_the_page_without_measuring(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[str] = []

    def write() -> Path:
        calls.append("write")
        return tmp_path / "RESULTS.md"

    monkeypatch.setattr(results_page, "write", write)
    assert run.main(["--results-only"]) == 0
    assert calls == ["write"]


def test_the_catalog_names_the_figures_bench_run_measures() -> None:
    assert set(BY_KEY) == set(run.FIGURES)
    for figure in FIGURES:
        assert run.FIGURES[figure.key].split(":")[0] == figure.module


def test_the_committed_page_is_what_the_committed_json_gives() -> None:
    committed = (ROOT / "bench" / "RESULTS.md").read_text()
    expected = results_page.render(results_page.FIGURES_DIR, results_page.PAGE)
    assert committed == expected, "rewrite it: python -m bench.run --results-only"
    for figure in FIGURES:
        if results_page.saved_path(figure.key).exists():
            assert f"[figures/{figure.key}.json](figures/{figure.key}.json)" in committed
    history = results_page.anchors((ROOT / "bench" / "HISTORY.md").read_text())
    linked = [link.split(")")[0] for link in committed.split("(HISTORY.md#")[1:]]
    assert len(linked) == len(FIGURES) and set(linked) <= set(history.values())
