"""The files `coli models add PATH` registered: a list of paths in the data folder.

A registered file stays where it is and is never deleted by colibri; `coli
models rm` only takes it off the list.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from colibri import paths
from colibri.errors import ColiError


def _store() -> Path:
    return paths.data_dir() / "library.json"


def registered() -> list[Path]:
    try:
        data = json.loads(_store().read_text())
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise ColiError(f"cannot read the model list {_store()}: {exc}") from exc
    return [Path(p) for p in data.get("files", []) if isinstance(p, str)]


def _write(files: list[Path]) -> None:
    tmp = _store().with_suffix(".tmp")
    tmp.write_text(json.dumps({"files": [str(p) for p in files]}, indent=1))
    os.replace(tmp, _store())


def add(path: Path) -> bool:
    """Register a file (absolute); False when it was already there."""
    path = Path(os.path.abspath(path))
    files = registered()
    if path in files:
        return False
    _write(files + [path])
    return True


def remove(path: Path) -> bool:
    path = Path(os.path.abspath(path))
    files = registered()
    if path not in files:
        return False
    _write([p for p in files if p != path])
    return True
