"""One orchestrator replica as a service: its runners and its completions listener."""
