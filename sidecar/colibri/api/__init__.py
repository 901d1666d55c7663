"""The HTTP API families: one module of routes each, shared errors, body parsing and SSE framing."""
