"""The fleet as the loop sees it: publish calls as Celery tasks, await their results on
a Redis stream, and know which pools have a live worker."""
