"""The module-level app, for gunicorn only (`gunicorn api.wsgi:app`)."""

import engine.nodes  # noqa: F401  (warm start: the first request must not import the nodes)
from api.app import create_app

app = create_app()
