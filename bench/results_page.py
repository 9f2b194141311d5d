"""bench/RESULTS.md: the current figures, written from the JSON each figure's latest run
saved under bench/figures/ (`python -m bench.run --results-only` rewrites it without
measuring anything). The page holds nothing that is not in the JSON or in bench.catalog,
so the same files always give the same page."""

from __future__ import annotations

import json
import os
import re
import textwrap
from pathlib import Path
from typing import Any

from bench.catalog import FIGURES, Figure
from bench.report import Table, fmt

HERE = Path(__file__).resolve().parent
FIGURES_DIR = HERE / "figures"
PAGE = HERE / "RESULTS.md"
HISTORY_NAME = "HISTORY.md"
RUN = ".venv/bin/python -m bench.run"
WIDTH = 88


def saved_path(key: str, figures_dir: Path = FIGURES_DIR) -> Path:
    """Where a figure's latest result is saved.

    Args:
        key: the figure's key (`bench.run --only` takes it).
        figures_dir: the folder of saved results.

    Returns:
        The path of its JSON.
    """
    return figures_dir / f"{key}.json"


def figure_result(
    table: Table, machine: dict[str, Any], sizes: dict[str, Any], *, smoke: bool = False
) -> dict[str, Any]:
    """One figure's result, shaped as a run's JSON holding that figure alone (so that
    `bench.run --render` and the figure's plot read it as they read a run's).

    Args:
        table: the figure's table, as measured.
        machine: the machine it ran on, with the date and load average at its start.
        sizes: the run's sizes.
        smoke: whether it ran at the tiny sizes.

    Returns:
        The JSON-ready result.
    """
    return {
        "machine": machine,
        "smoke": smoke,
        "sizes": sizes,
        "seconds": table.data.get("seconds"),
        "tables": {table.key: table.to_json()},
        "errors": {},
    }


def save(result: dict[str, Any], key: str, figures_dir: Path = FIGURES_DIR) -> Path:
    """Write a figure's result where the page reads it.

    Args:
        result: what `figure_result` made.
        key: the figure's key.
        figures_dir: the folder of saved results.

    Returns:
        The path written.
    """
    path = saved_path(key, figures_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, default=str) + "\n")
    return path


def load(key: str, figures_dir: Path = FIGURES_DIR) -> dict[str, Any] | None:
    """A figure's saved result, or None when it has none.

    Args:
        key: the figure's key.
        figures_dir: the folder of saved results.

    Returns:
        The parsed JSON, or None.

    Raises:
        ValueError: the file holds no table for the figure.
    """
    path = saved_path(key, figures_dir)
    if not path.exists():
        return None
    found: dict[str, Any] = json.loads(path.read_text())
    if key not in found.get("tables", {}):
        raise ValueError(f"{path} holds no table {key!r}")
    return found


def slug(heading: str) -> str:
    """The anchor GitHub gives a markdown heading (before any -1 for repeats).

    Args:
        heading: the heading's text, without its #s.

    Returns:
        The anchor, without its #.
    """
    text = re.sub(r"[`*]", "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(markdown: str) -> dict[str, str]:
    """Each heading of a markdown text, mapped to its anchor, in order; repeated
    headings get -1, -2 as GitHub gives them. Headings inside code blocks are skipped.

    Args:
        markdown: the document.

    Returns:
        Heading text to anchor (the first heading of a text wins).
    """
    found: dict[str, str] = {}
    seen: dict[str, int] = {}
    fenced = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        match = re.match(r"#{1,6} (.+)", line)
        if fenced or not match:
            continue
        heading = match.group(1).strip()
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.setdefault(heading, f"{base}-{count}" if count else base)
    return found


def render(figures_dir: Path = FIGURES_DIR, page: Path = PAGE) -> str:
    """The page, from the saved results and the catalog.

    Args:
        figures_dir: the folder of saved results.
        page: where the page will be written (its links are relative to it).

    Returns:
        The page's markdown.
    """
    history_path = page.parent / HISTORY_NAME
    history = anchors(history_path.read_text()) if history_path.exists() else None
    folder = Path(os.path.relpath(figures_dir, page.parent)).as_posix()
    figures = sorted(FIGURES, key=lambda f: f.rank)
    results = {f.key: load(f.key, figures_dir) for f in figures}
    parts = [_head(history is not None), _index(figures, results)]
    parts += [_section(f, results[f.key], figures_dir, folder, history) for f in figures]
    return "\n\n".join(parts) + "\n"


def write(figures_dir: Path = FIGURES_DIR, page: Path = PAGE) -> Path:
    """Write the page from the saved results.

    Args:
        figures_dir: the folder of saved results.
        page: where to write it.

    Returns:
        The page's path.
    """
    page.write_text(render(figures_dir, page))
    return page


def heading(figure: Figure) -> str:
    """The heading of a figure's section on the page.

    Args:
        figure: the figure.

    Returns:
        The heading's text, without its #s.
    """
    return f"Figure {figure.number}: {figure.name}"


def rerun_commands(figure: Figure) -> list[str]:
    """The shell lines that measure a figure again, saving it and rewriting the page.

    Args:
        figure: the figure.

    Returns:
        The lines, setup first.
    """
    return [*figure.setup, f"{RUN} --only {figure.key}", *figure.also]


def _head(has_history: bool) -> str:
    intro = (
        "The current figures of `python -m bench.run`, each side by side with its "
        "reference, measured in the same run: rounds alternate between toolfleet and its "
        "reference so that the machine's noise hits both alike. Read them as ratios: each "
        "section says the machine, date and load its figure ran under, and on a shared "
        "machine absolute times change from hour to hour."
    )
    if has_history:
        intro += (
            " Why each figure looks as it does, pass by pass (what changed, what it "
            f"measured on the day), is in [{HISTORY_NAME}]({HISTORY_NAME})."
        )
    return f"""# toolfleet benchmark results

<!-- Written by bench.run from bench/figures/*.json and bench/catalog.py: rewrite it
with `python -m bench.run --results-only` rather than editing it. -->

{_wrap(intro)}

{
        _wrap(
            "A run at full sizes saves each figure it measured as `bench/figures/<name>.json` "
            "and rewrites this page from those files:"
        )
    }

```sh
{RUN}                  # every figure but 9, which is opt-in (~20 min)
{RUN} --only fanout    # some figures; the others keep their saved results
{RUN} --smoke          # tiny sizes, to check that it runs; saves nothing
{RUN} --results-only   # rewrite this page from the saved JSON
```"""


def _index(figures: list[Figure], results: dict[str, dict[str, Any] | None]) -> str:
    lines = [
        "| figure | name | reference | latest saved result | goal |",
        "| --- | --- | --- | --- | --- |",
    ]
    for figure in figures:
        result = results[figure.key]
        link = f"[{figure.number}. {figure.name}](#{slug(heading(figure))})"
        if result is None:
            saved, goal = "none saved yet", "-"
        else:
            table = Table(**result["tables"][figure.key])
            saved = str(result.get("machine", {}).get("date", "saved (no date)"))
            verdict = {True: "met", False: "not met", None: "not measured"}[table.met]
            goal = verdict if table.goal else "no goal"
        lines.append(f"| {link} | `{figure.key}` | {figure.versus} | {saved} | {goal} |")
    return "\n".join(lines)


def _section(
    figure: Figure,
    result: dict[str, Any] | None,
    figures_dir: Path,
    folder: str,
    history: dict[str, str] | None,
) -> str:
    json_name = f"{folder}/{figure.key}.json"
    parts = [
        f"## {heading(figure)}",
        _wrap(f"**Measures.** {figure.measures}"),
        _wrap(f"**Reference.** {figure.reference}"),
    ]
    module = f"`{figure.module.replace('.', '/')}.py`"
    if result is None:
        parts.append(
            _wrap(
                f"**Latest result: none saved yet.** `{json_name}` does not exist. The "
                f"command below measures the figure ({module}), saves it there and "
                "rewrites this page."
            )
        )
    else:
        table = Table(**result["tables"][figure.key])
        parts.append(
            _wrap(
                f"**Latest result**, measured by {module} and saved in "
                f"[{json_name}]({json_name}). {_measured_on(result)}"
            )
        )
        sizes = _sizes(figure, result.get("sizes", {}))
        if sizes:
            parts.append(_wrap(f"Sizes: {sizes}."))
        parts.append(table.to_markdown().rstrip("\n"))
        image = figures_dir / f"{figure.key}.png"
        if image.exists():
            parts.append(f"![{figure.name}]({folder}/{image.name})")
    commands = "\n".join(rerun_commands(figure))
    parts.append(f"Rerun:\n\n```sh\n{commands}\n```")
    passes = _history_link(figure, history)
    if passes:
        parts.append(_wrap(passes))
    return "\n\n".join(parts)


def _measured_on(result: dict[str, Any]) -> str:
    machine: dict[str, Any] = result.get("machine", {})
    said = [f"Ran {machine['date']}" if machine.get("date") else "Ran (no date saved)"]
    box = ", ".join(
        str(machine[k]) for k in ("cpu", "memory", "os") if machine.get(k) not in (None, "?")
    )
    if machine.get("nproc"):
        said.append(f" on {machine['nproc']} cores" + (f" ({box})" if box else ""))
    elif box:
        said.append(f" on {box}")
    if machine.get("loadavg_at_start"):
        said.append(f", load average {machine['loadavg_at_start']} at its start")
    versions = ", ".join(
        f"{label} {machine[k]}"
        for k, label in (
            ("python", "Python"),
            ("redis_server", "redis-server"),
            ("celery", "Celery"),
            ("google_genai", "google-genai"),
            ("toolfleet", "toolfleet"),
        )
        if machine.get(k) not in (None, "-")
    )
    if versions:
        said.append(f"; {versions}")
    if isinstance(result.get("seconds"), int | float):
        said.append(f"; it took {fmt(float(result['seconds']))} s")
    if result.get("smoke"):
        said.append("; **smoke sizes**, not for comparison")
    return "".join(said) + "."


def _sizes(figure: Figure, sizes: dict[str, Any]) -> str:
    def short(value: Any) -> str:
        if isinstance(value, list | tuple):
            return "/".join(str(v) for v in value)
        return str(value)

    return ", ".join(
        f"`{name}`={short(value)}"
        for name, value in sizes.items()
        if any(name.startswith(prefix) for prefix in figure.sizes)
    )


def _history_link(figure: Figure, history: dict[str, str] | None) -> str:
    if history is None or not figure.history:
        return ""
    for text, anchor in history.items():
        if text.startswith(figure.history):
            return f"Its newest pass in the history: [{text}]({HISTORY_NAME}#{anchor})."
    raise ValueError(f"no heading of {HISTORY_NAME} begins with {figure.history!r}")


def _wrap(paragraph: str) -> str:
    # Break only at spaces: links and inline code stay whole where they have none.
    return textwrap.fill(paragraph, WIDTH, break_long_words=False, break_on_hyphens=False)
