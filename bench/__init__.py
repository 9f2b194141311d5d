"""toolfleet's benchmark suite: `python -m bench.run` (see bench/RESULTS.md)."""
