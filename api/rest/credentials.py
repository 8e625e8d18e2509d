"""The deployment's credentials as the editor's credential picker needs them: id, name and type,
never their data (the secrets stay in MINI_N8N_CREDENTIALS_FILE)."""

from __future__ import annotations

from flask import jsonify

from api.rest import bp
from api.runtime import runtime


@bp.get("/credentials")
def list_credentials():
    items = [
        {"id": c["id"], "name": c["name"], "type": c["type"]}
        for c in runtime().credentials.redacted()
    ]
    return jsonify({"data": items})
