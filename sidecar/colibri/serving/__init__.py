"""The serving core: the engine thread, KV-slot admission, the served model and one
generation on it. Nothing here knows HTTP (colibri.api is the edge)."""
