"""The model library: every GGUF on this machine colibri can find, described from its header.

    entries = scan()                       # colibri's models, the Hugging Face cache, LM Studio, llama.cpp, --models-dir
    entry = find(entries, "qwen2.5-coder-0.5b-instruct")
    plan = entry.plan()                    # colibri.plan on this machine, before loading

colibri.library.discovery finds the files (a multi-part GGUF is one model),
colibri.library.registry keeps the files `coli models add` registered, and
colibri.library.hub pulls from the Hugging Face Hub.
"""
from colibri.library.discovery import ModelEntry, find, scan, search_roots

__all__ = ["ModelEntry", "find", "scan", "search_roots"]
