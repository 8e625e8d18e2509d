"""The module-level app, for gunicorn only (`gunicorn api.wsgi:app`)."""

from api.app import create_app

app = create_app()
