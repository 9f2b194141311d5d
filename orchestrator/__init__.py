"""The orchestrator: the agent loop and what it runs on.

Subpackages, lowest layer first: `models` (the Model protocol, Gemini, the offline
model), `agents`, `sessions` (events, store, leases, parked turns), `fleet` (dispatch,
results, live pools), `loop` (invocation, turn, runner), `completions` (the stream
consumer, applier, resumer), `service` (one replica), `httpapi` and `cli`. Users
import from the facade, `toolfleet`.
"""
