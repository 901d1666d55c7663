"""Where colibri keeps its files: platformdirs folders, created on demand.

Every path a user might otherwise have to create by hand comes from here;
COLI_DATA_DIR and COLI_CACHE_DIR override the defaults (tests use them).
"""
from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP = "colibri"


def data_dir() -> Path:
    """Models assembled from packages, settings (platformdirs user data dir)."""
    path = Path(os.environ.get("COLI_DATA_DIR") or platformdirs.user_data_dir(APP, appauthor=False))
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_dir() -> Path:
    """Learned routing heat, KV files: safe to delete (platformdirs user cache dir)."""
    path = Path(os.environ.get("COLI_CACHE_DIR") or platformdirs.user_cache_dir(APP, appauthor=False))
    path.mkdir(parents=True, exist_ok=True)
    return path


def models_dir() -> Path:
    path = data_dir() / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path
