"""Everything toolfleet knows of Celery's and kombu's internals, in one place.

Celery's task messages (protocol 2) and kombu's Redis transport are a wire format the
orchestrator writes and the workers read without going through Celery's producer or
consumer: that knowledge lives here and nowhere else, and the contract tests
(tests/unit/test_celery_wire_contract.py) compare it with what the installed Celery and
kombu do, so a release that changes the wire fails them.

- `layout`: kombu's Redis-transport keys (priority lists, the unacknowledged set).
- `build`: a task message as Celery sends it, in kombu's Redis envelope.
- `parse`: a task message read back (from kombu's Redis envelope, from a RabbitMQ
  delivery, or as Celery's consumer received it).
- `redis_queue`: messages taken, acknowledged and put back as kombu's consumer does.
- `rabbitmq`: the same messages published to RabbitMQ, its queues' depths, and
  py-amqp's reads made larger for a consumer.
- `transport`: the worker's kombu Redis transport.
- `consumer`: the worker's Celery consumer (task events in batches).
- `worker`: what a running worker knows of its requests and its pool.

Each module is imported on its own: the orchestrator loads none of the worker's.
"""
