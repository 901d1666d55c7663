"""colibri — run Mixture-of-Experts language models on ordinary hardware.

The sidecar package: the `coli` command line, the engine binding (engine.py,
the only module that touches the C engine), and later the HTTP server.
"""
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("colibri")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0-dev"
