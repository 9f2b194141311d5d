"""An agent, its sub-agents and their tools as a Graphviz DOT digraph: the drawing ADK's
dev UI shows beside the chat (it renders the DOT source in the page)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from toolfleet.orchestrator.agents.agent import Agent


@dataclass(frozen=True)
class Palette:
    """The drawing's colours for a light or a dark page.

    Attributes:
        background: The graph's background.
        fill: The nodes' fill.
        text: The nodes' labels.
        line: The nodes' borders and the edges.
    """

    background: str
    fill: str
    text: str
    line: str


LIGHT = Palette(background="#F8FAFC", fill="#FFFFFF", text="#0F172A", line="#94A3B8")
DARK = Palette(background="#0F172A", fill="#1E293B", text="#F8FAFC", line="#94A3B8")


def find_agent(root: Agent, path: str) -> Agent | None:
    """The agent at `path`: sub-agents' names from the root, "/"-separated (the root's own
    name first or left out); the root for an empty path.

    Args:
        root: The app's root agent.
        path: Like "desk/billing".

    Returns:
        The agent, or None when no sub-agent has one of the path's names.
    """
    parts = [p for p in path.strip("/").split("/") if p]
    if parts and parts[0] == root.name:
        parts = parts[1:]
    agent: Agent | None = root
    for name in parts:
        agent = next((a for a in agent.sub_agents if a.name == name), None) if agent else None
    return agent


def tool_names(agent: Agent) -> list[str]:
    """The names of the agent's own tools and toolsets, as ADK's dev UI lists them.

    Args:
        agent: Whose tools.

    Returns:
        One name per entry of `agent.tools`: its `name`, else its `__name__`.
    """
    return [str(getattr(t, "name", None) or getattr(t, "__name__", t)) for t in agent.tools]


def agent_dot(agent: Agent, *, dark: bool = False) -> str:
    """`agent` and everything under it as DOT: an agent node each, a dashed node per tool,
    an edge from each agent to its sub-agents and tools.

    Args:
        agent: The agent to draw from.
        dark: Colours for a dark page.

    Returns:
        The DOT source of one digraph.
    """
    colours = DARK if dark else LIGHT
    lines = [
        "digraph {",
        f'  graph [bgcolor="{colours.background}" fontname=Helvetica rankdir=TB]',
        f'  node [shape=rect style="rounded,filled" fillcolor="{colours.fill}"'
        f' fontcolor="{colours.text}" color="{colours.line}" fontname=Helvetica fontsize=12]',
        f'  edge [color="{colours.line}" arrowsize=0.7]',
        *_nodes(agent),
        "}",
    ]
    return "\n".join(lines) + "\n"


def _nodes(agent: Agent) -> Iterator[str]:
    me = _quoted(agent.name)
    yield f"  {me} [label={_quoted(agent.name)} tooltip=Agent]"
    for tool in tool_names(agent):
        # Tools of two agents may share a name: each agent's own node.
        node = _quoted(f"{agent.name}/{tool}")
        yield f'  {node} [label={_quoted(tool)} style="rounded,filled,dashed" tooltip=Tool]'
        yield f"  {me} -> {node} [style=dashed]"
    for sub in agent.sub_agents:
        yield from _nodes(sub)
        yield f"  {me} -> {_quoted(sub.name)}"


def _quoted(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'
