"""The chat model clients: what talks to a model's server (HTTP, TLS, sockets, streaming,
retries), behind the ChatModel protocol the engine keeps (engine/llm.py). A runner builds one
ModelClients (models/clients.py) and lends it to the engine as Services.chat_models. Imports
core, memory and engine (for the protocol and its types); never api or worker."""
