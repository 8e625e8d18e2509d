"""How a process runs things beside its requests and executions: greenlets under gevent's
monkey-patching (the api under gunicorn, a Celery worker), threads elsewhere (tests, `mini-n8n
run`). Below api and worker, which both use it; imports nothing of ours but core."""
