"""Tool workers: the Celery app, one task per tool, the executor."""

__all__: list[str] = []
