"""The package's shape: no import cycles, a lazy facade, one import name."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

import toolfleet

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "toolfleet"


def package_modules() -> dict[str, Path]:
    """Every module of `toolfleet` (packages' __init__ included), by dotted name."""
    modules: dict[str, Path] = {}
    files = [
        Path(folder, file)
        for folder, _, names in os.walk(PACKAGE, followlinks=True)  # the symlinked folders
        for file in names
        if file.endswith(".py")
    ]
    for path in files:
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def imports_of(name: str, path: Path, modules: Mapping[str, Path]) -> set[str]:
    """The package's modules that `name` imports anywhere in its body: at the top, in
    functions (lazy imports) and under TYPE_CHECKING (type-only) alike."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from a.b import c` imports module a.b.c when c is one, else names of a.b.
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                for alias in node.names
            ]
        found |= {t for t in targets if t in modules and t != name}
    return found


def find_cycle(graph: Mapping[str, set[str]]) -> list[str] | None:
    """One cycle of the directed graph, as a path that ends where it starts, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)) is not None:
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)) is not None:
            return cycle
    return None


def module_graph() -> dict[str, set[str]]:
    modules = package_modules()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def test_the_package_has_no_import_cycle_type_only_and_lazy_imports_included() -> None:
    graph = module_graph()
    assert len(graph) > 80  # the walk found the package through its symlinks
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def layer_of(module: str) -> str:
    """The orchestrator's subpackage a module belongs to (a root module is its own)."""
    parts = module.split(".")
    return ".".join(parts[:3])


def test_the_orchestrators_subpackages_depend_on_each_other_without_cycles() -> None:
    layers: dict[str, set[str]] = {}
    for module, targets in module_graph().items():
        if not module.startswith("toolfleet.orchestrator.") or module.count(".") < 2:
            continue
        deps = layers.setdefault(layer_of(module), set())
        deps |= {
            layer_of(t)
            for t in targets
            if t.startswith("toolfleet.orchestrator.") and layer_of(t) != layer_of(module)
        }
    assert {"toolfleet.orchestrator.loop", "toolfleet.orchestrator.sessions"} <= set(layers)
    assert find_cycle(layers) is None, " -> ".join(find_cycle(layers) or [])


def test_shared_imports_neither_the_orchestrator_nor_the_workers() -> None:
    for module, targets in module_graph().items():
        if module.startswith("toolfleet.shared"):
            above = {t for t in targets if not t.startswith("toolfleet.shared")}
            assert not above, f"{module} imports {sorted(above)}"


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def loaded_after(code: str) -> set[str]:
    """The modules a fresh interpreter has loaded after running `code`."""
    script = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return set(json.loads(out.stdout.splitlines()[-1]))


HEAVY = ("fastapi", "uvicorn", "starlette")
ORCHESTRATION = (
    "toolfleet.orchestrator.loop",
    "toolfleet.orchestrator.httpapi",
    "toolfleet.orchestrator.service",
    "toolfleet.orchestrator.completions",
    "toolfleet.orchestrator.fleet",
)


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.startswith(HEAVY) or m.startswith(ORCHESTRATION))


def test_a_worker_importing_tool_modules_loads_neither_the_http_stack_nor_the_loop() -> None:
    # Tools, long-running tools with background jobs, agents and an AgentTool.
    loaded = loaded_after(
        "import toolfleet.workers.app, toolfleet.workers.tasks\n"
        "from toolfleet.shared.discovery import load_definitions\n"
        "load_definitions(['examples.support_tickets', 'examples.summarizer',"
        " 'examples.bank_account', 'examples.documents'])"
    )
    assert "toolfleet.shared.tools" in loaded  # the imports did happen
    assert heavy(loaded) == []


def test_the_facade_loads_what_is_asked_for_on_first_use() -> None:
    assert heavy(loaded_after("import toolfleet")) == []
    assert "toolfleet.orchestrator.loop.runner" in loaded_after("from toolfleet import Runner")


def test_every_public_name_of_the_facade_resolves_to_its_own_definition() -> None:
    for name in toolfleet.__all__:
        value = getattr(toolfleet, name)
        assert value is not None, name
    assert toolfleet.Agent.__module__ == "toolfleet.orchestrator.agents.agent"
    assert toolfleet.post_result.__module__ == "toolfleet.shared.completions"
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = toolfleet.Nope  # type: ignore[attr-defined]


def test_the_adk_module_gives_the_facades_own_objects_under_adks_names() -> None:
    import toolfleet.adk as adk
    from toolfleet.adk import _MODULES

    client_side = {
        "Runner",
        "InMemoryRunner",
        "App",
        "RunConfig",
        "StreamingMode",
        "LlmCallsLimitExceededError",
        "Event",
        "EventActions",
        "Session",
        # App's configs, and BaseAgent with its callback types: for ADK programs only.
        "ResumabilityConfig",
        "EventsCompactionConfig",
        "BaseAgent",
        "BeforeAgentCallback",
        "AfterAgentCallback",
    } | {n for n in adk.__all__ if n.endswith("Service")}
    # What does not port is toolfleet.adk's only: it exists to say so when used.
    client_side |= {n for n, module in _MODULES.items() if module.endswith(".adk.unsupported")}
    # ADK's older name of the same object.
    client_side |= {"MCPToolset"}
    for name in set(adk.__all__) - client_side:
        assert getattr(adk, name) is getattr(toolfleet, name), name
    assert adk.LlmAgent is adk.Agent
    # ADK's client side is toolfleet.adk's own: the facade's Runner keeps its meaning.
    assert adk.Runner is not toolfleet.Runner
    assert adk.Runner.__module__ == "toolfleet.orchestrator.adk.runner"
    assert all(getattr(adk, name) is not None for name in client_side)
    assert heavy(loaded_after("from toolfleet.adk import FunctionTool, ToolContext")) == []
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = adk.Nope  # type: ignore[attr-defined]


def test_the_version_comes_from_the_installed_distribution() -> None:
    from importlib import metadata

    assert toolfleet.__version__ == metadata.version("toolfleet")


def top_level_names(wheel_top_level: Iterator[str]) -> set[str]:
    return {line.strip() for line in wheel_top_level if line.strip()}


def test_the_build_installs_one_top_level_name() -> None:
    """The wheel's packages are all under `toolfleet` (what setuptools finds)."""
    from setuptools import find_packages

    found = find_packages(str(ROOT), include=["toolfleet*"])
    assert {p.split(".")[0] for p in found} == {"toolfleet"}
    assert {"toolfleet.orchestrator.loop", "toolfleet.workers", "toolfleet.shared"} <= set(found)


def test_the_readme_the_examples_and_compose_import_from_the_facade() -> None:
    # toolfleet.adk is public too: ADK's names for programs moving over.
    deep = re.compile(
        r"^\s*from (toolfleet\.(?!adk import)\S+|shared|orchestrator|workers)\b.* import", re.M
    )
    texts = {p.name: p.read_text() for p in [ROOT / "README.md", ROOT / "compose.yaml"]}
    texts |= {str(p.relative_to(ROOT)): p.read_text() for p in (ROOT / "docs").rglob("*.md")}
    texts |= {p.name: p.read_text() for p in (ROOT / "examples").glob("*.py")}
    offenders = {name: deep.findall(text) for name, text in texts.items() if deep.search(text)}
    assert offenders == {}
    assert "from toolfleet import" in texts["README.md"]
    assert "from toolfleet import" in texts["compose.yaml"]
