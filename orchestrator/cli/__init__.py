"""The `toolfleet` command: demo, run, serve, worker, tickets, status; and what it starts
on this machine (the embedded server and local workers)."""
