"""A stand-in for the slice of SupplyContext a model node uses, for the node's tests (here, with
a recording ChatModels) and the model clients' (tests/models, with real ones)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from engine.services import Services


class StandInContext:
    """The slice of SupplyContext the node uses: node, get_parameter, services, cancel."""

    def __init__(self, parameters, credentials, store, models=None, name="OpenAI Chat Model"):
        self.node = SimpleNamespace(name=name, parameters=parameters, credentials=credentials)
        self.services = Services(credentials=store, chat_models=models)
        self.cancel = threading.Event()

    def get_parameter(self, path, default=None):
        value = self.node.parameters
        for part in path.split("."):
            if not isinstance(value, dict) or part not in value:
                return default
            value = value[part]
        return value
