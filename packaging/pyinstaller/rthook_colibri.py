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
