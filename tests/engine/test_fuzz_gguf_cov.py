"""The GGUF reader under a coverage-guided fuzzer: libFuzzer with AddressSanitizer + UBSan
(engine/tools/fuzz_gguf.c, `make -C engine fuzz`, clang), seeded with real and generated files
(tests/engine/gguf_seeds.py), for a fixed budget: COLI_FUZZ_SECONDS (default 60) of
mutations, 0 crashes, 0 leaks, 0 sanitizer reports. bench/fuzz_soak.sh runs the same for
1M executions and more.

Needs clang with libFuzzer (Debian: clang-14, libclang-rt-14-dev); scripts/test.sh installs
them and sets COLI_REQUIRE_FUZZER=1, so in CI a missing fuzzer fails instead of skipping."""
from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.engine import gguf_seeds

ROOT = Path(__file__).resolve().parents[2]
FUZZER = ROOT / "engine" / "build" / "fuzz" / "fuzz_gguf"
STATS = re.compile(r"^stat::(\w+):\s+(\d+)", re.M)


def build_fuzzer() -> Path:
    """engine/build/fuzz/fuzz_gguf, built now (skips, or fails under COLI_REQUIRE_FUZZER=1,
    without a clang that has libFuzzer)."""
    proc = subprocess.run(["make", "-s", "-C", str(ROOT / "engine"), "fuzz"], capture_output=True, text=True)
    if proc.returncode != 0:
        message = "no clang with libFuzzer to build engine/build/fuzz/fuzz_gguf:\n" + proc.stderr[-2000:]
        if os.environ.get("COLI_REQUIRE_FUZZER") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return FUZZER


def spawned(argv: list[str], timeout: float) -> list[str]:
    """argv run as a child of timeout(1): Linux keeps a process's peak RSS across exec, so the
    fuzzer exec'd straight from pytest would inherit pytest's peak (GBs after the model tests)
    and libFuzzer's -rss_limit_mb would fire on its first check; a process forked from the
    small timeout(1) starts counting from its own size."""
    return ["timeout", "--kill-after=10", str(int(timeout)), *argv]


def run_fuzzer(corpus: Path, seeds: Path, *limits: str, timeout: float) -> tuple[subprocess.CompletedProcess, dict]:
    env = {**os.environ, "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0",
           "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"}
    argv = [str(FUZZER), *limits, "-print_final_stats=1", "-timeout=10", "-rss_limit_mb=2048",
            f"-artifact_prefix={corpus.parent}/", str(corpus), str(seeds)]
    proc = subprocess.run(spawned(argv, timeout), capture_output=True, text=True, errors="replace", env=env,
                          timeout=timeout + 30)
    return proc, {k: int(v) for k, v in STATS.findall(proc.stderr)}


def coverage(corpus: Path) -> tuple[int, int, int]:
    """(edges covered, features, edges instrumented) of the reader by a corpus, replayed once."""
    proc = subprocess.run(spawned([str(FUZZER), "-runs=0", str(corpus)], 300), capture_output=True, text=True,
                          errors="replace", env={**os.environ, "ASAN_OPTIONS": "detect_leaks=0"}, timeout=330)
    total = int(re.search(r"Loaded 1 modules\s+\((\d+) inline 8-bit counters\)", proc.stderr).group(1))
    m = re.findall(r"(?:INITED|DONE)\s+cov: (\d+) ft: (\d+)", proc.stderr)
    return int(m[-1][0]), int(m[-1][1]), total


@pytest.mark.slow
def test_gguf_reader_survives_coverage_guided_fuzzing(tmp_path, record_property):
    build_fuzzer()
    seeds, corpus = tmp_path / "seeds", tmp_path / "corpus"
    corpus.mkdir()
    written = gguf_seeds.write(seeds)
    assert len(written) >= 8
    seed_cov, _, total = coverage(seeds)
    budget = int(os.environ.get("COLI_FUZZ_SECONDS", "60"))
    t0 = time.monotonic()
    proc, stats = run_fuzzer(corpus, seeds, f"-max_total_time={budget}", timeout=budget + 300)
    wall = time.monotonic() - t0
    crashes = [p.name for p in tmp_path.iterdir() if p.name.startswith(("crash-", "leak-", "timeout-", "oom-"))]
    assert proc.returncode == 0 and not crashes, f"{crashes}\n{proc.stderr[-6000:]}"
    assert "runtime error" not in proc.stderr and "Sanitizer" not in proc.stderr, proc.stderr[-6000:]
    runs = stats["number_of_executed_units"]
    cov, features, _ = coverage(corpus)
    figures = (f"{runs} executions in {wall:.0f} s ({runs / wall:.0f}/s), coverage {cov} of {total} edges "
               f"({100 * cov / total:.0f}%, {seed_cov} from the seeds alone), {features} features, "
               f"{len(list(corpus.iterdir()))} corpus files")
    record_property("fuzz_gguf", figures)
    print("\nfuzz_gguf:", figures)
    assert runs >= 1000 * budget // 10, figures  # the budget was spent fuzzing, not starting
    assert cov > seed_cov, figures               # the fuzzer found paths the seeds do not take
    assert cov >= total // 3, figures


def test_seeds_open_and_are_small(tmp_path, asan_gguf_check):
    """Every seed is a file the reader opens, except the three written to reach an error, and
    small enough for the fuzzer to mutate quickly."""
    paths = gguf_seeds.write(tmp_path)
    assert all(p.stat().st_size <= gguf_seeds.MAX_SEED for p in paths)
    out = subprocess.run([str(asan_gguf_check), *map(str, paths)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-4000:]
    errors = {line.split(" ", 3)[2].rstrip(":").rsplit("/", 1)[-1]: line.split(" ", 2)[1]
              for line in out.stdout.splitlines() if line.startswith("ERR")}
    assert errors == {"empty.gguf": "truncated", "magic.gguf": "truncated"}, out.stdout
    assert len(paths) - len(errors) >= 7
