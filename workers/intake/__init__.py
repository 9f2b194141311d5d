"""The io workers' intake: Celery task messages taken from Redis in batches.

Celery's consumer takes one message per round trip (BRPOP, then the unacknowledged-set
write, the ack and a task event each another): about 500 messages/s per worker process,
which made a turn of 1,000 one-second I/O calls take 3 s on one io worker. The intake
takes up to a batch in one script call, acknowledges in batches and buffers the task
events Flower reads, while keeping the broker's layout (kombu's unacknowledged hash and
index), so the broker's sweep still redelivers the calls of a worker that died.
"""
