"""What the engine said when it loaded a file: runs, or its named reason why not.

The engine's load checks (architecture, hyperparameters, every tensor's shape
and type) run only when it opens a model, so the library remembers each
outcome by file (real path, size, modification time) in the cache folder:
a file that changes is checked again. `coli serve` records every load it does;
`coli models list --check` loads the files not seen yet.
"""
from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path

from colibri import paths

log = logging.getLogger(__name__)
_lock = threading.Lock()


def _store() -> Path:
    return paths.cache_dir() / "library-verdicts.json"


def _key(path: str | os.PathLike[str]) -> str | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return f"{os.path.realpath(path)}|{st.st_size}|{st.st_mtime_ns}"


def _read() -> dict:
    try:
        data = json.loads(_store().read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def lookup(path: str | os.PathLike[str]) -> tuple[bool, str] | None:
    """(runs, reason) as the engine last said for this very file, else None."""
    key = _key(path)
    found = _read().get(key) if key else None
    if not isinstance(found, dict):
        return None
    return bool(found.get("runs")), str(found.get("reason", ""))


def record(path: str | os.PathLike[str], runs: bool, reason: str = "") -> None:
    key = _key(path)
    if key is None:
        return
    with _lock:
        data = _read()
        data[key] = {"runs": runs, "reason": reason}
        tmp = _store().with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps(data, indent=1))
            os.replace(tmp, _store())
        except OSError as exc:  # a read-only cache folder costs a re-check, nothing more
            log.info("cannot record the engine's verdict on %s: %s", path, exc)


def check(path: str | os.PathLike[str]) -> tuple[bool, str]:
    """Open the model with the engine (one slot, a short context) and record what it says."""
    from colibri.engine import Engine
    from colibri.errors import EngineError

    try:
        with Engine(path, n_ctx=256, n_slots=1, n_threads=1):
            pass
    except EngineError as exc:
        record(path, False, str(exc))
        return False, str(exc)
    record(path, True, "the engine loaded it")
    return True, "the engine loaded it"
