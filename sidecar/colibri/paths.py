"""Where colibri keeps its files: platformdirs folders, created on demand.

Every path a user might otherwise have to create by hand comes from here;
COLI_DATA_DIR and COLI_CACHE_DIR override the defaults (tests use them).
"""
from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP = "colibri"


def _folder(path: str | Path) -> Path:
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    return path


def data_dir() -> Path:
    """Models assembled from packages, settings (platformdirs user data dir)."""
    return _folder(os.environ.get("COLI_DATA_DIR") or platformdirs.user_data_dir(APP, appauthor=False))


def cache_dir() -> Path:
    """Learned routing heat: safe to delete (platformdirs user cache dir)."""
    return _folder(os.environ.get("COLI_CACHE_DIR") or platformdirs.user_cache_dir(APP, appauthor=False))


def models_dir() -> Path:
    return _folder(data_dir() / "models")


def state_dir() -> Path:
    """Warm state that should survive a restart: persisted KV slots
    (platformdirs user state dir; COLI_STATE_DIR overrides)."""
    return _folder(os.environ.get("COLI_STATE_DIR") or platformdirs.user_state_dir(APP, appauthor=False))


def kv_dir() -> Path:
    """Persisted KV slots, one folder per model identity (EngineThread's persist_dir)."""
    return _folder(state_dir() / "kv")
