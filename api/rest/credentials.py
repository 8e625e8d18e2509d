"""The deployment's credentials as the editor's credential picker needs them: id, name and type,
never their data (the secrets stay in MINI_N8N_CREDENTIALS_FILE)."""

from __future__ import annotations

from flask import jsonify

from api.errors import ApiError
from api.rest import bp
from api.runtime import runtime
from core.credentials import CredentialError


@bp.get("/credentials")
def list_credentials():
    try:
        store = runtime().credentials
    except CredentialError as err:  # its message names the file, never a secret
        raise ApiError(500, str(err)) from None
    items = [{"id": c["id"], "name": c["name"], "type": c["type"]} for c in store.redacted()]
    return jsonify({"data": items})
