"""The agent drawing ADK's dev UI shows: an agent tree and its tools as DOT."""

from __future__ import annotations

from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.httpapi.adk_graph import DARK, LIGHT, agent_dot, find_agent


def check_stock(item: str) -> dict[str, int]:
    """How many of `item` there are."""
    return {"in_stock": len(item)}


def refund(amount: int) -> dict[str, int]:
    """Refund `amount`."""
    return {"refunded": amount}


def desk() -> Agent:
    billing = Agent(name="billing", tools=[refund])
    return Agent(name="desk", tools=[check_stock], sub_agents=[billing])


def test_the_drawing_has_each_agent_its_tools_and_its_sub_agents() -> None:
    dot = agent_dot(desk())
    assert dot.startswith("digraph {") and dot.rstrip().endswith("}")
    assert '"desk" [label="desk" tooltip=Agent]' in dot
    assert '"billing" [label="billing" tooltip=Agent]' in dot
    assert '"desk/check_stock" [label="check_stock"' in dot
    assert '"desk" -> "desk/check_stock" [style=dashed]' in dot
    assert '"billing" -> "billing/refund" [style=dashed]' in dot
    assert '"desk" -> "billing"' in dot
    assert f'bgcolor="{LIGHT.background}"' in dot
    assert f'bgcolor="{DARK.background}"' in agent_dot(desk(), dark=True)


def test_a_node_path_picks_the_agent_to_draw_from() -> None:
    root = desk()
    assert find_agent(root, "") is root
    assert find_agent(root, "desk") is root
    billing = find_agent(root, "desk/billing")
    assert billing is not None and billing.name == "billing"
    assert find_agent(root, "/billing/") is billing  # the root's name may be left out
    assert find_agent(root, "desk/shipping") is None
    drawn = agent_dot(billing)
    assert '"billing/refund"' in drawn and '"desk"' not in drawn
