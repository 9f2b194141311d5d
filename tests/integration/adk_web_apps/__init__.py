"""Apps served both by `toolfleet serve --http` and by ADK's own `adk api_server`/`adk web`:
an ADK agents folder (one package an app, its `agent` module holding `root_agent`)."""
