"""Agents: a name, an instruction, tools and sub-agents; and which model drives each."""
