"""Ports of the ADK reference's Python examples: only their import lines changed."""
