"""Contracts shared by the orchestrator and the workers: settings, wire messages, tool
definitions and schemas, Redis key names, the Celery configuration.

Import from the facade (`from toolfleet import tool, ToolContext, ...`); this package
imports nothing itself, so a module of it loads only what it needs.
"""
