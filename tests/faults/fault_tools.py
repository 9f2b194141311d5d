"""Tools and agents of the orchestrator fault tests (kills, restarts, replicas)."""
