"""Long-running results posted later: read from the completions streams, applied once,
and the sessions they complete resumed."""
