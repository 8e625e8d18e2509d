"""The module-level Celery app, for Celery's own command line only (`celery -A worker.celery_cli`).

Flower and `celery inspect` find the app here; nothing of ours imports this module. The app is
the same one `mini-n8n worker` runs (worker/celery_app.py), built from the same environment, so
point it at the deployment with REDIS_URL (or CELERY_BROKER_URL) and MINI_N8N_TASK_QUEUE:

    REDIS_URL=redis://localhost:6379/0 celery -A worker.celery_cli flower --port=5555

Flower lists the workers and the tasks they ran; a task's id is its execution id. Workers run
without gossip, mingle and heartbeats, so Flower learns of them through their task events and
its own inspect calls (its default): a worker shows as online once it answers.
"""

from worker.celery_app import create_celery

app = create_celery()
