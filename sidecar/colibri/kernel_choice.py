"""Which kernel set computes each weight type on this CPU, chosen by measuring.

The engine's SIMD sets (AVX2, AVX-VNNI, AVX-512) give most weight types the same
bits (colibri_kernel_same_bits); which one is fastest depends on the core: Zen 4
runs 512-bit operations as two 256-bit halves, Intel's cores do not. At model
load, each such type the model holds is timed on a real slice of its weights
(the first routed expert where it has experts: decode's bulk) with every set this
CPU runs, and the fastest is kept. Timings are cached per CPU model and engine
build in cache_dir()/kernels.json, so a later load measures nothing;
`coli --version -v` shows them.

COLI_KERNELS: "calibrate" (default), "auto" (the widest set, no measuring), or a
set for everything ("avx2", "avxvnni", "avx512", "scalar": other bits for F32/F16
weights, as a llama.cpp built for that ISA).
"""
from __future__ import annotations

import json
import logging
import os
import platform
import time
from pathlib import Path

from colibri import engine
from colibri.paths import cache_dir

log = logging.getLogger(__name__)

SETS = ("avx2", "avxvnni", "avx512")  # the SIMD sets a choice is made between
MAX_ROWS = 1024  # rows of a sample: an expert's, or a slice of a big matrix (a few ms a set)
ROUNDS, REPS = 5, 6  # sets interleaved ROUNDS times, the fastest of REPS products each
MARGIN = 0.03  # another set must beat the default by this much: noise does not flip a choice


def cpu_model() -> str:
    """The CPU's model name ("AMD EPYC 9R14 96-Core Processor"), what timings are cached by."""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def cache_path() -> Path:
    return cache_dir() / "kernels.json"


def build_key() -> str:
    return f"{engine.version()} ({engine.build_info()})"


def read_cache() -> dict:
    try:
        data = json.loads(cache_path().read_text())
        return data if isinstance(data, dict) and isinstance(data.get("cpus"), dict) else {"cpus": {}}
    except (OSError, ValueError):
        return {"cpus": {}}


def cached_choices() -> dict:
    """This CPU's cached timings for this engine build: {"Q4_0 2048x768": {"isa", "us": {set: µs}}}."""
    entry = read_cache()["cpus"].get(cpu_model()) or {}
    return entry.get("choices", {}) if entry.get("engine") == build_key() else {}


def _write_cache(choices: dict) -> None:
    data = read_cache()
    data["cpus"][cpu_model()] = {"engine": build_key(), "features": engine.cpu_features(), "choices": choices}
    path = cache_path()
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        os.replace(tmp, path)  # two processes loading at once: each file whole
    except OSError as exc:
        log.info("kernel timings not cached (%s): %s", path, exc)


def samples(path: str | os.PathLike[str]) -> dict[str, tuple[str, int, int]]:
    """Per weight type the choice applies to: (tensor, n_in, rows) of a representative weight:
    the first routed expert of an expert tensor, else the type's biggest matrix."""
    best: dict[str, tuple[int, int, str, int, int]] = {}
    with engine.GGUFFile(path) as g:
        for t in g.tensors():
            if len(t.shape) < 2 or not engine.kernel_same_bits(t.type):
                continue
            rows = min(t.shape[1], MAX_ROWS)
            rank = (int("_exps" in t.name), t.nbytes)
            if t.type not in best or rank > best[t.type][:2]:
                best[t.type] = (*rank, t.name, t.shape[0], rows)
    return {ty: (name, n_in, rows) for ty, (_, _, name, n_in, rows) in best.items()}


def _runnable(default: str) -> list[str]:
    """The SIMD sets this CPU runs, the default first (set_type_isa refuses the others)."""
    out = [default]
    for isa in SETS:
        if isa != default and engine.kernel_set_runnable(isa):
            out.append(isa)
    return out


def measure(path: str | os.PathLike[str], type_name: str, sample: tuple[str, int, int], sets: list[str]) -> dict:
    """Microseconds per decode-step product of the sample with each set, interleaved; the pick."""
    name, _, rows = sample
    best = {isa: float("inf") for isa in sets}
    with engine.GGUFFile(path) as g:
        g.time_decode(name, sets[0], rows, 1)  # the sample's pages read in before any timing
        for _ in range(ROUNDS):
            for isa in sets:
                best[isa] = min(best[isa], g.time_decode(name, isa, rows, REPS))
    pick = min(sets, key=best.get)
    if best[pick] > best[sets[0]] * (1 - MARGIN):
        pick = sets[0]
    return {"isa": pick, "us": {isa: round(s * 1e6, 2) for isa, s in best.items()}}


def choose(path: str | os.PathLike[str]) -> str:
    """Apply COLI_KERNELS for the model at `path` before it is opened; the set in force after."""
    mode = os.environ.get("COLI_KERNELS", "calibrate").strip().lower() or "calibrate"
    if mode not in ("calibrate", "auto"):
        try:
            engine.set_kernel_isa(mode)  # a forced set for everything
        except engine.EngineError as exc:
            raise engine.EngineError(exc.code, f"COLI_KERNELS={mode}: {exc.message}") from None
        return engine.kernel_isa()
    if mode == "auto":
        return engine.kernel_isa()
    default = engine.kernel_default_isa()
    if default not in SETS:
        return engine.kernel_isa()  # scalar (no SIMD): nothing to choose between
    sets = _runnable(default)
    if len(sets) < 2:
        return engine.kernel_isa()
    started = time.perf_counter()
    choices = cached_choices()
    measured = []
    try:
        found = samples(path)
    except engine.EngineError:
        return engine.kernel_isa()  # the open that follows names what is wrong with the file
    for type_name, sample in sorted(found.items()):
        key = f"{type_name} {sample[1]}x{sample[2]}"
        cached = choices.get(key)
        if not isinstance(cached, dict) or cached.get("isa") not in sets or set(cached.get("us", {})) != set(sets):
            try:
                choices[key] = measure(path, type_name, sample, sets)
            except engine.EngineError as exc:  # a tensor the engine cannot take: its open will say so
                log.info("kernels for %s not measured: %s", type_name, exc)
                continue
            measured.append(key)
        try:
            engine.set_kernel_type_isa(type_name, choices[key]["isa"])
        except engine.EngineError as exc:  # a set this (virtual) CPU no longer runs: the default stays
            log.info("kernels for %s stay %s: %s", type_name, default, exc)
    if measured:
        _write_cache(choices)
        log.info("kernels measured for %s in %.0f ms: %s", ", ".join(measured), 1e3 * (time.perf_counter() - started),
                 "; ".join(f"{k}: {describe(choices[k])}" for k in measured))
    log.info("kernels: %s", engine.kernel_isa())
    return engine.kernel_isa()


def describe(choice: dict) -> str:
    us = choice.get("us", {})
    return f"{choice.get('isa')} (" + ", ".join(f"{isa} {v:g} µs" for isa, v in sorted(us.items())) + ")"


def version_lines() -> list[str]:
    """`coli --version -v`: the set in force and this CPU's cached choices."""
    lines = [f"kernels: {engine.kernel_default_isa()} by default; COLI_KERNELS="
             f"{os.environ.get('COLI_KERNELS', 'calibrate')}; cache {cache_path()}"]
    choices = cached_choices()
    if not choices:
        lines.append(f"  no timings cached for this CPU ({cpu_model()}) and engine build: a model's load measures them")
    for key, choice in sorted(choices.items()):
        lines.append(f"  {key}: {describe(choice)}")
    return lines
