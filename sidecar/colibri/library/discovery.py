"""Finding the GGUF files on this machine and describing each from its header.

Where colibri looks (search_roots), in this order:

- colibri's own models folder (the catalog's pulls, `coli models pull REPO`),
- the model files a frozen desktop build carries ($COLI_BUNDLED_MODELS),
- the files `coli models add PATH` registered (colibri.library.registry),
- the Hugging Face cache: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub
  (models--ORG--NAME/snapshots/REV/*.gguf),
- LM Studio's folders: ~/.lmstudio/models and ~/.cache/lm-studio/models,
- llama.cpp's cache: $LLAMA_CACHE, else ~/.cache/llama.cpp,
- $COLI_MODELS_DIR (os.pathsep-separated) and every --models-dir.

A model split in parts (NAME-00001-of-00003.gguf) is one entry. Only headers
are read (the engine's GGUF reader), so a list of dozens of files takes well
under a second. Whether this build can run a file: the tensor types come from
the engine's own table (GGUFFile.describe's tensor_computes); the architecture
and everything else the engine checks at load is known once the engine has
loaded it (a served model, or `coli models list --check`), and remembered in
the cache folder (colibri.library.verdicts).
"""
from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from colibri import paths
from colibri.errors import ModelNotFound

log = logging.getLogger(__name__)

SPLIT = re.compile(r"^(?P<stem>.+)-(?P<i>\d{5})-of-(?P<n>\d{5})\.gguf$", re.IGNORECASE)
MAX_DEPTH = 6  # LM Studio nests publisher/repo/file; deeper folders are not model folders
SOURCES = ("colibri", "registered", "huggingface", "lmstudio", "llama.cpp", "models-dir")


@dataclass(frozen=True)
class Root:
    source: str  # one of SOURCES
    path: Path


@dataclass
class ModelEntry:
    """One model: its file (the first part of a split one), what its header says, whether it runs."""

    id: str
    path: Path
    source: str
    parts: list[Path]
    size: int  # bytes on disk, every part
    arch: str | None = None
    name: str | None = None
    n_params: int = 0
    quant_types: list[str] = field(default_factory=list)  # by bytes, largest first
    n_ctx_train: int = 0
    has_chat_template: bool = False
    runnable: bool | None = None  # None: the tensor types compute; the engine has not loaded it yet
    reason: str = ""  # why not (or what is not checked yet)
    repo: str | None = None  # the Hugging Face repository of a file in its cache

    @property
    def split(self) -> bool:
        return len(self.parts) > 1

    @property
    def owned(self) -> bool:
        """A file colibri put in its own models folder (the only kind `coli models rm` deletes)."""
        return _inside(self.path, paths.models_dir())

    def plan(self, kv_slots: int = 1, ctx: int | None = None):
        """colibri.plan's placement on this machine (None for a model colibri cannot open)."""
        from colibri.plan import make_plan

        if self.split or self.runnable is False:
            return None
        return make_plan(self.path, ctx=ctx, kv_slots=kv_slots)

    def as_dict(self, plan=None) -> dict:
        d = {"id": self.id, "path": str(self.path), "source": self.source, "parts": [str(p) for p in self.parts],
             "size": self.size, "arch": self.arch, "name": self.name, "n_params": self.n_params,
             "quant_types": self.quant_types, "n_ctx_train": self.n_ctx_train,
             "chat_template": self.has_chat_template, "runnable": self.runnable, "reason": self.reason,
             "owned": self.owned, "repo": self.repo}
        if plan is not None:
            d["plan"] = plan_summary(plan)
        return d


def plan_summary(plan) -> dict:
    """What the list and the dashboard show of a plan."""
    return {"placement": plan.placement, "fits": plan.fits, "reason": plan.reason, "ctx": plan.ctx,
            "ram_bytes": plan.dense_bytes + plan.kv_bytes_per_slot * plan.kv_slots
            + (plan.expert_bytes if plan.placement == "resident" else plan.cache_bytes + plan.pin_bytes),
            "file_bytes": plan.file_bytes, "ram_available": plan.ram_available, "threads": plan.threads}


def _inside(path: Path, folder: Path) -> bool:
    try:
        Path(os.path.abspath(path)).relative_to(os.path.abspath(folder))
        return True
    except ValueError:
        return False


# ---- where to look -----------------------------------------------------------------

def _home() -> Path:
    return Path(os.path.expanduser("~"))


def _xdg_cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or _home() / ".cache")


def hf_hub_cache() -> Path:
    """The Hugging Face hub cache as huggingface_hub finds it."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return Path(os.environ[var]).expanduser()
    home = os.environ.get("HF_HOME")
    return (Path(home).expanduser() if home else _xdg_cache() / "huggingface") / "hub"


def models_dirs_from_env() -> list[Path]:
    return [Path(p).expanduser() for p in os.environ.get("COLI_MODELS_DIR", "").split(os.pathsep) if p.strip()]


def search_roots(models_dirs: list[str | os.PathLike[str]] = ()) -> list[Root]:
    """Every folder colibri looks in, the usual ones first (see the module's docstring)."""
    llama = os.environ.get("LLAMA_CACHE")
    roots = [Root("colibri", paths.models_dir())]
    bundled = os.environ.get("COLI_BUNDLED_MODELS")
    if bundled:
        roots.append(Root("bundled", Path(bundled)))
    roots += [Root("huggingface", hf_hub_cache()),
             Root("lmstudio", _home() / ".lmstudio" / "models"), Root("lmstudio", _xdg_cache() / "lm-studio" / "models"),
             Root("llama.cpp", Path(llama).expanduser() if llama else _xdg_cache() / "llama.cpp")]
    roots += [Root("models-dir", p) for p in models_dirs_from_env()]
    roots += [Root("models-dir", Path(p).expanduser()) for p in models_dirs]
    return roots


# ---- finding files -----------------------------------------------------------------

def _gguf_files(root: Root) -> list[Path]:
    if not root.path.is_dir():
        return []
    if root.source == "huggingface":  # models--ORG--NAME/snapshots/REV/...; blobs/ holds the same bytes
        return [p for repo in sorted(root.path.glob("models--*")) for p in _hf_snapshot_files(repo)]
    found = []
    base_depth = len(root.path.parts)
    for folder, dirs, files in os.walk(root.path):
        depth = len(Path(folder).parts) - base_depth
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and depth < MAX_DEPTH)
        paths_here = sorted((Path(folder) / f for f in files), key=lambda p: (p.is_symlink(), p.name))
        found += [p for p in paths_here if _is_gguf(p)]  # a link to a file found here too: the file wins
    return found


def _hf_snapshot_files(repo: Path) -> list[Path]:
    """A cached repository's GGUFs, one per file name: from the revision refs/main names when it has
    it, else from the newest snapshot that has it (an older revision left in the cache is not listed)."""
    try:
        main = (repo / "refs" / "main").read_text().strip()
    except OSError:
        main = ""
    snapshots = sorted((s for s in (repo / "snapshots").glob("*") if s.is_dir()),
                       key=lambda s: (s.name != main, -s.stat().st_mtime))
    chosen: dict[Path, Path] = {}
    for snap in snapshots:
        for p in sorted(snap.glob("**/*")):
            if _is_gguf(p):
                chosen.setdefault(p.relative_to(snap), p)
    return sorted(chosen.values())


def _is_gguf(p: Path) -> bool:
    return p.name.lower().endswith(".gguf") and not p.name.startswith(".") and p.is_file()


def _group(files: list[Path]) -> list[list[Path]]:
    """One list per model: a single file, or the parts of a split one in order (the first may be missing)."""
    models: list[list[Path]] = []
    splits: dict[tuple[Path, str, int], dict[int, Path]] = {}
    for f in files:
        m = SPLIT.match(f.name)
        if m:
            splits.setdefault((f.parent, m["stem"], int(m["n"])), {})[int(m["i"])] = f
        else:
            models.append([f])
    for (_, _, n), parts in splits.items():
        models.append([parts.get(i) for i in range(1, n + 1)])  # None where a part is missing
    return models


def _hf_repo(path: Path, root: Path) -> str | None:
    try:
        top = path.relative_to(root).parts[0]
    except (ValueError, IndexError):
        return None
    return top[len("models--"):].replace("--", "/") if top.startswith("models--") else None


def _base_id(parts: list[Path | None]) -> str:
    first = next(p for p in parts if p is not None)
    m = SPLIT.match(first.name)
    return (m["stem"] if m else first.name[:-len(".gguf")]).lower()


def scan(models_dirs: list[str | os.PathLike[str]] = (), describe: bool = True) -> list[ModelEntry]:
    """Every model found, each described from its header (describe=False: names and sizes only)."""
    from colibri.library import registry

    from colibri.models import id_of

    seen: set[str] = set()
    found: list[tuple[Root, list[Path | None]]] = []
    roots = search_roots(models_dirs)
    registered = [Root("registered", p) for p in registry.registered()]
    for root in roots[:1] + registered + roots[1:]:
        files = [root.path] if root.source == "registered" else _gguf_files(root)
        if root.source == "registered" and not _is_gguf(root.path):
            log.info("a registered model is gone: %s", root.path)
            continue
        for parts in _group(files):
            key = os.path.realpath(next(p for p in parts if p is not None))
            if key in seen:
                continue
            seen.add(key)
            found.append((root, parts))
    entries: list[ModelEntry] = []
    taken: set[str] = set()
    for root, parts in found:
        present = [p for p in parts if p is not None]
        first = present[0]
        model_id = (id_of(first) if root.source in ("colibri", "bundled") else None) or _base_id(parts)
        repo = _hf_repo(first, root.path) if root.source == "huggingface" else None
        if model_id in taken:  # the same file name in two places: the later one says where it is
            model_id = f"{model_id}@{(repo or root.source).replace('/', '-').lower()}"
        n = 2
        while model_id in taken:
            model_id, n = f"{model_id.rsplit('~', 1)[0]}~{n}", n + 1
        taken.add(model_id)
        entry = ModelEntry(id=model_id, path=first, source=root.source, parts=present,
                           size=sum(_size(p) for p in present), repo=repo)
        if len(present) < len(parts):
            missing = [i + 1 for i, p in enumerate(parts) if p is None]
            entry.runnable, entry.reason = False, (f"incomplete_split: part(s) {', '.join(map(str, missing))} of "
                                                   f"{len(parts)} are missing")
        elif describe:
            _describe(entry)
        entries.append(entry)
    return entries


def _size(p: Path) -> int:
    try:
        return p.stat().st_size
    except OSError:
        return 0


def _describe(entry: ModelEntry) -> None:
    """Fill the entry from its header(s); a file the reader refuses is not runnable, with its reason."""
    from colibri.engine import GGUFFile
    from colibri.errors import EngineError
    from colibri.library import verdicts

    types: dict[str, int] = {}
    computes: dict[str, bool] = {}
    refusal: EngineError | None = None
    try:
        for i, part in enumerate(entry.parts):
            with GGUFFile(part) as g:
                info = g.describe()
                if i == 0 and not entry.split:
                    refusal = g.check()
                if i == 0:
                    entry.arch, entry.name = info.get("arch"), info.get("name")
                    entry.n_ctx_train = int(info.get("n_ctx_train") or 0)
                    entry.has_chat_template = bool(info.get("has_chat_template"))
            entry.n_params += int(info.get("n_params") or 0)
            for t, nbytes in (info.get("tensor_bytes") or {}).items():
                types[t] = types.get(t, 0) + int(nbytes)
            computes.update(info.get("tensor_computes") or {})
    except EngineError as exc:
        entry.runnable, entry.reason = False, str(exc)
        return
    entry.quant_types = sorted(types, key=lambda t: -types[t])
    cannot = [t for t in entry.quant_types if computes.get(t) is False]
    if cannot:
        entry.runnable, entry.reason = False, (f"unsupported_tensor_type: this build cannot compute with "
                                               f"{', '.join(cannot)}")
    elif entry.split:
        entry.runnable, entry.reason = False, (f"split_gguf: {len(entry.parts)} parts; colibri opens one file: "
                                               f"`coli models add {entry.path}` joins them into its models folder")
    elif not entry.arch:
        entry.runnable, entry.reason = False, "missing: the file names no general.architecture"
    elif refusal is not None:  # the engine's own binding (colibri_gguf_check) said no, by name
        entry.runnable, entry.reason = False, str(refusal)
    else:  # it binds; a load that failed anyway (memory, a fault in the weights) is remembered
        known = verdicts.lookup(entry.path)
        entry.runnable, entry.reason = known if known is not None and known[0] is False else (True, None)


def find(entries: list[ModelEntry], wanted: str) -> ModelEntry:
    """The entry an id (or a path) names; a named error listing the ids otherwise."""
    for e in entries:
        if e.id == wanted:
            return e
    target = os.path.realpath(os.path.expanduser(wanted))
    for e in entries:
        if any(os.path.realpath(p) == target for p in e.parts):
            return e
    ids = ", ".join(e.id for e in entries) or "none found"
    raise ModelNotFound(f"no model {wanted!r} in the library (known: {ids}); `coli models list` shows them")
