"""Tools of the worker fault tests (pool child and worker kills, crashes, timeouts)."""
