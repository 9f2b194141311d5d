"""The loop: one invocation's model turns, each turn's calls, parking a turn for a
credential, and the Runner that runs invocations under a session's lease."""
