"""Node types as the engine declares them: what the editor's node creator and parameter forms
are built from (engine/description.py)."""

from __future__ import annotations

from flask import jsonify

from api.rest import bp
from engine.registry import node_types


@bp.get("/node-types")
def list_node_types():
    types = [cls.description.to_json(name) for name, cls in sorted(node_types().items())]
    return jsonify({"data": types})
