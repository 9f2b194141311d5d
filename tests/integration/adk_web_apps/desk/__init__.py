"""The desk app, as ADK's agent loader expects it: the package imports its agent module."""

from . import agent as agent
