"""ADK-style programs of our own, written against ADK's public API.

Each `<name>/agent.py` imports from `toolfleet.adk`; with those imports switched to the
matching `google.adk` ones it runs unchanged on ADK.
"""
