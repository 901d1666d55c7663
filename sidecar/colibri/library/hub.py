"""`coli models pull REPO[:FILE]`: a GGUF from the Hugging Face Hub, with huggingface_hub.

    path = pull_hub("Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF:q4_k_m")

The file goes to colibri's models folder (hf/ORG/NAME/FILE: colibri owns it,
`coli models rm` deletes it) through huggingface_hub: its HEAD for the size
and ETag, then its http_get (progress bar, retries, and a Range request from
the last whole chunk when the network cuts a transfer) into FILE.<sha>.part,
kept when a run is stopped, so the next run asks only for the rest
(hf_hub_download itself drops a partial file); a file the Hub keeps in Xet
storage goes through hf_hub_download and Xet's own chunk cache. Then colibri checks the bytes against the Hub's checksum: the
SHA-256 of an LFS file (its ETag), the git blob SHA-1 of a small one; a
mismatch deletes the file. A verified file gets a stamp, so a later pull of
it needs no network. FILE picks the file: a file name, or a quantization such
as Q4_K_M; without it, the repository's only GGUF, else its Q4_K_M one. A
split GGUF (NAME-00001-of-00003.gguf) is fetched whole, every part checked,
then joined into NAME.gguf (colibri.library.merge) and the parts deleted.
$HF_ENDPOINT, $HF_TOKEN and the other HF_* variables work as in every
huggingface_hub tool.
"""
from __future__ import annotations

import hashlib
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from colibri import paths
from colibri.assembly import reporter, sha256_of, stamp_ok, write_stamp
from colibri.errors import ColiError, ModelNotFound
from colibri.library.discovery import SPLIT

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HubFile:
    path: str
    size: int
    sha256: str | None  # an LFS file's
    blob_id: str  # the git blob SHA-1


def parse_ref(ref: str) -> tuple[str, str | None]:
    """"ORG/NAME[:FILE]" -> (repo, FILE or None)."""
    repo, _, wanted = ref.partition(":")
    if repo.count("/") != 1 or not all(repo.split("/")):
        raise ModelNotFound(f"{ref!r}: give a Hub repository as ORG/NAME, optionally :FILE or :QUANT")
    return repo, wanted or None


def choose(files: list[HubFile], wanted: str | None, repo: str = "") -> list[HubFile]:
    """The files to fetch: one GGUF, or every part of a split one (see the module's docstring)."""
    ggufs = [f for f in files if f.path.lower().endswith(".gguf")]
    if wanted:
        picked = [f for f in ggufs if f.path == wanted or f.path.rsplit("/", 1)[-1] == wanted]
        if not picked:
            tag = re.compile(rf"(^|[-_.]){re.escape(wanted)}([-_.]|$)", re.IGNORECASE)
            picked = [f for f in ggufs if tag.search(f.path.rsplit("/", 1)[-1][:-len(".gguf")])]
    else:
        models = [f for f in ggufs if "mmproj" not in f.path.lower()]
        picked = models if len(_models(models)) == 1 else [
            f for f in models if re.search(r"q4_k_m", f.path, re.IGNORECASE)]
    groups = _models(picked)
    names = ", ".join(sorted({g[0].path for g in _models(ggufs).values()})) or "none"
    if not groups:
        raise ModelNotFound(f"no GGUF in {repo or 'the repository'} matches {wanted or 'Q4_K_M'}; it has: {names}")
    if len(groups) > 1:
        raise ModelNotFound(f"{wanted or 'no file named'}: {len(groups)} GGUFs in {repo or 'the repository'} match; "
                            f"name one as REPO:FILE ({', '.join(sorted(g[0].path for g in groups.values()))})")
    return next(iter(groups.values()))


def _models(files: list[HubFile]) -> dict[str, list[HubFile]]:
    """Files grouped by model: a split model's parts under one key, in order."""
    groups: dict[str, list[HubFile]] = {}
    for f in sorted(files, key=lambda f: f.path):
        m = SPLIT.match(f.path)
        groups.setdefault(f"{m['stem']}-of-{m['n']}" if m else f.path, []).append(f)
    return groups


def local_dir(repo: str) -> Path:
    return paths.models_dir() / "hf" / repo


def pull_hub(ref: str, revision: str | None = None, progress: bool = True) -> Path:
    """Fetch and verify the file(s) REPO[:FILE] names; the path of the (first) file."""
    try:
        from huggingface_hub import HfApi
        from huggingface_hub.hf_api import RepoFile
        from huggingface_hub.utils import logging as hf_logging
    except ImportError as exc:  # a frozen build without it
        raise ColiError("this build has no huggingface_hub: pip install huggingface_hub") from exc
    hf_logging.disable_propagation()  # its own handler says it once (a resumed transfer, say), not ours again
    repo, wanted = parse_ref(ref)
    with _named_errors(repo):
        tree = HfApi().list_repo_tree(repo, revision=revision, recursive=True)
        files = [HubFile(f.path, f.size, f.lfs.sha256 if f.lfs else None, f.blob_id)
                 for f in tree if isinstance(f, RepoFile)]
    chosen = choose(files, wanted, repo)
    target_dir = local_dir(repo)
    if len(chosen) == 1:
        return _fetch(repo, chosen[0], target_dir, revision, progress)
    # a split model: every part, joined into one file (what the engine opens), the parts then deleted
    joined = target_dir / joined_name(chosen[0].path)
    marker = hashlib.sha256("".join(f.sha256 or f.blob_id for f in chosen).encode()).hexdigest()
    if stamp_ok(joined, marker):
        return joined
    got = [_fetch(repo, f, target_dir, revision, progress) for f in chosen]
    from colibri.library.merge import merge_split

    merge_split(got, joined, reporter("Joining", joined.name) if progress else None)
    write_stamp(joined, marker)
    for part in got:
        part.unlink(missing_ok=True)
        part.with_name(part.name + ".verified.json").unlink(missing_ok=True)
    return joined


def joined_name(first_part: str) -> str:
    """NAME-00001-of-00003.gguf -> NAME.gguf (in the part's folder)."""
    m = SPLIT.match(first_part)
    return f"{m['stem']}.gguf" if m else first_part


def _fetch(repo: str, f: HubFile, target_dir: Path, revision: str | None, progress: bool) -> Path:
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url
    from huggingface_hub.file_download import is_xet_available

    target = target_dir / f.path
    sha = f.sha256 or f.blob_id
    if stamp_ok(target, sha):
        return target
    with _named_errors(repo):
        meta = get_hf_file_metadata(hf_hub_url(repo, f.path, revision=revision))
        if meta.xet_file_data is not None and is_xet_available():  # Xet's chunk cache resumes on its own
            got = Path(hf_hub_download(repo, f.path, revision=revision, local_dir=target_dir))
        else:
            got = _download_resuming(meta, f, target)
    check = reporter("Verifying", target.name) if progress else None
    actual = sha256_of(got, check) if f.sha256 else _git_blob_sha1(got)
    if actual != sha or got.stat().st_size != f.size:
        got.unlink(missing_ok=True)
        (target_dir / ".cache" / "huggingface" / "download" / f"{f.path}.metadata").unlink(missing_ok=True)
        raise ColiError(f"checksum_mismatch: {repo}/{f.path} arrived as {actual} ({got.stat().st_size if got.exists() else 0} "
                        f"bytes), the Hub says {sha} ({f.size} bytes); deleted, pull again")
    write_stamp(got, sha)
    return got


def _download_resuming(meta, f: HubFile, target: Path) -> Path:
    """huggingface_hub's http_get into TARGET.<sha>.part, appending to what an earlier run left (a Range
    request from there; a server that ignores it starts over), then renamed to TARGET."""
    from urllib.parse import urlsplit

    from huggingface_hub import constants
    from huggingface_hub.file_download import http_get
    from huggingface_hub.utils import build_hf_headers

    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{(f.sha256 or f.blob_id)[:16]}.part")
    for stale in target.parent.glob(f"{target.name}.*.part"):  # another revision's bytes
        if stale != partial:
            stale.unlink(missing_ok=True)
    headers = build_hf_headers()
    if urlsplit(meta.location).netloc != urlsplit(constants.ENDPOINT).netloc:
        headers.pop("authorization", None)  # a CDN gets no token (as hf_hub_download does)
    with open(partial, "ab") as fh:
        if fh.tell() > f.size:
            fh.truncate(0)
        if fh.tell():
            log.info("resuming %s at %d of %d bytes", target.name, fh.tell(), f.size)
        http_get(meta.location, fh, resume_size=fh.tell(), headers=headers, expected_size=f.size,
                 displayed_filename=target.name)
    os.replace(partial, target)
    return target


def _git_blob_sha1(path: Path) -> str:
    digest = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


class _named_errors:
    """huggingface_hub's and the network's failures as one line naming the repository."""

    def __init__(self, repo: str):
        self.repo = repo

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, tb) -> bool:
        if exc is None or isinstance(exc, ColiError):
            return False
        from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError, RepositoryNotFoundError

        if isinstance(exc, (RepositoryNotFoundError, EntryNotFoundError)):
            raise ModelNotFound(f"{self.repo} is not on the Hub (or is private/gated: set HF_TOKEN): "
                                f"{str(exc).splitlines()[0]}") from exc
        if isinstance(exc, (HfHubHTTPError, OSError)) or type(exc).__module__.startswith("httpx"):
            raise ColiError(f"hub_unreachable: could not fetch {self.repo}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from exc
        return False
