"""Agents from the ADK seed documents, running on the toolfleet fleet."""
