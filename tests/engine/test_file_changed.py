"""A model file that shrinks under the engine (truncated in place by a
re-download, a network drive that drops) is a named error, never SIGBUS: the
engine refuses with model_file_changed, says so in file_state, and the
process lives on. Each case runs in a child process, so a regression shows as
the child's death by signal rather than the test run's."""
from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.fixtures import moe_models as mm

pytest.importorskip("gguf")

ROOT = Path(__file__).resolve().parents[2]


def run_child(code: str, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-X", "faulthandler", "-c", textwrap.dedent(code), *args],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode != -signal.SIGBUS, f"killed by SIGBUS:\n{proc.stderr}"
    assert proc.returncode == 0, proc.stderr
    return proc


def served_copy(tmp_path: Path, **overrides) -> Path:
    src = mm.tiny("qwen3moe", "Q8_0", **overrides)
    dst = tmp_path / "model.gguf"
    shutil.copyfile(src, dst)
    return dst


@pytest.mark.parametrize("stream", [False, True], ids=["resident", "streamed"])
def test_a_truncated_model_is_a_named_error(tmp_path, stream):
    path = served_copy(tmp_path)
    out = run_child("""
        import os, sys
        from colibri.engine import Engine
        from colibri.errors import EngineError
        path, stream = sys.argv[1], sys.argv[2] == "1"
        kw = dict(expert_cache_bytes=1 << 16) if stream else {}
        with Engine(path, n_ctx=128, n_threads=2, **kw) as e:
            toks = [e.bos] + list(range(5, 40))
            e.eval(toks, 0)
            assert e.file_state() == "intact"
            os.truncate(path, os.path.getsize(path) // 3)
            assert e.file_state() == "changed"
            for attempt in range(2):  # and it stays refused
                try:
                    e.eval(toks, 0)
                except EngineError as err:
                    assert err.code == "model_file_changed", err
                    print(err.message)
                else:
                    raise SystemExit("a generation ran on a truncated file")
        print("alive")
    """, str(path), "1" if stream else "0")
    assert out.stdout.strip().endswith("alive")
    assert str(path) in out.stdout  # the message names the file


def test_a_fault_on_a_mapped_page_is_absorbed(tmp_path):
    """The race the size check cannot close: pages vanish between the check and
    the read. Reading the mapping of a file truncated to nothing gives zeros,
    not SIGBUS (the guard's own path), and the state says changed."""
    path = served_copy(tmp_path)
    out = run_child("""
        import os, sys
        from colibri.engine import Engine, GGUFFile
        path = sys.argv[1]
        with Engine(path, n_ctx=64, n_threads=1) as e:
            g = GGUFFile(path)
            os.truncate(path, 0)  # the page cache drops every page of it: any read faults
            try:
                g.metadata()  # walks the mapping from byte 0
            except Exception as err:
                print("refused:", type(err).__name__)
            print(e.file_state())
        print("alive")
    """, str(path))
    assert "changed" in out.stdout and out.stdout.strip().endswith("alive")


def test_a_file_replaced_at_its_path_keeps_serving(tmp_path):
    path = served_copy(tmp_path)
    other = mm.tiny("qwen3moe", "Q8_0", n_layer=3)
    out = run_child("""
        import os, shutil, sys
        from colibri.engine import Engine
        path, other = sys.argv[1], sys.argv[2]
        with Engine(path, n_ctx=64, n_threads=1) as e:
            before = bytes(e.eval([e.bos, 5, 6], 0, logits="last"))
            shutil.copyfile(other, path + ".new")
            os.replace(path + ".new", path)  # a finished download renamed into place
            assert e.file_state() == "replaced"
            assert bytes(e.eval([e.bos, 5, 6], 0, logits="last")) == before  # the old inode still serves
        print("alive")
    """, str(path), str(other))
    assert out.stdout.strip().endswith("alive")


@pytest.mark.parametrize("faulthandler", [False, True], ids=["alone", "behind_faulthandler"])
def test_a_fault_elsewhere_still_kills(tmp_path, faulthandler):
    """The guard answers for model mappings only: a SIGBUS on any other mapping
    gets what it would have got without colibri (here death by the signal),
    also with a handler installed in front of ours that hands it back — never a
    hang."""
    path = served_copy(tmp_path)
    other = tmp_path / "other.bin"
    other.write_bytes(b"x" * 8192)
    code = textwrap.dedent("""
        import faulthandler, mmap, os, sys
        from colibri.engine import Engine
        e = Engine(sys.argv[1], n_ctx=64, n_threads=1)  # the guard is installed
        if sys.argv[3] == "1":
            faulthandler.enable()  # in front of ours, its previous handler ours ...
            e2 = Engine(sys.argv[1], n_ctx=64, n_threads=1)  # ... and ours in front again, handing on to it
        with open(sys.argv[2], "r+b") as f:
            m = mmap.mmap(f.fileno(), 8192)
        os.truncate(sys.argv[2], 0)
        print(m[5000])
    """)
    proc = subprocess.run([sys.executable, "-c", code, str(path), str(other), "1" if faulthandler else "0"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == -signal.SIGBUS, (proc.returncode, proc.stderr[-500:])
