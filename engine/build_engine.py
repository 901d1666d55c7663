"""cffi builder for `colibri._engine`: the C engine compiled in out-of-line API mode.

setup.py points `cffi_modules` here, so `pip install .` (or `-e .`) compiles
every engine/src/*.c into one extension module. Flags:

- default: `-O3 -march=native` (a build for this machine);
- COLI_PORTABLE=1: no -march, so the module runs on any CPU of the
  architecture; SIMD kernels are still chosen at run time (cpu.c);
- COLI_CFLAGS: extra flags appended (e.g. "-g -O1").
"""
from __future__ import annotations

import os
import platform
import re
import shlex
from pathlib import Path

from cffi import FFI

ENGINE = Path(__file__).resolve().parent
ROOT = ENGINE.parent
HEADER = ENGINE / "include" / "colibri.h"


def cdef_source() -> str:
    """The part of colibri.h between CFFI-BEGIN and CFFI-END (plain declarations)."""
    text = HEADER.read_text()
    m = re.search(r"/\* CFFI-BEGIN \*/(.*)/\* CFFI-END \*/", text, re.S)
    if not m:
        raise RuntimeError(f"{HEADER}: CFFI-BEGIN/CFFI-END markers not found")
    return m.group(1)


def compile_flags() -> list[str]:
    # -ffp-contract=off: the kernels mirror llama.cpp's float operations one by
    # one, writing every fused multiply-add it does as an explicit fmaf; a
    # compiler that fuses on its own (clang's default) would change the bits
    flags = ["-std=c11", "-O3", "-Wall", "-Wextra", "-pthread", "-ffp-contract=off"]
    portable = os.environ.get("COLI_PORTABLE", "") not in ("", "0")
    machine = platform.machine().lower()
    if not portable:
        if machine in ("x86_64", "amd64", "i686"):
            flags.append("-march=native")
        elif machine in ("aarch64", "arm64"):
            flags.append("-mcpu=native")
    flags += shlex.split(os.environ.get("COLI_CFLAGS", ""))
    return flags


def link_flags() -> list[str]:
    # -Bsymbolic: the engine's own functions bind to themselves even when a
    # library loaded RTLD_GLOBAL first exports the same names (llama-cpp-python's
    # libggml has gguf_find_key, gguf_find_tensor, dequantize_row_*, ...)
    return ["-pthread"] + (["-Wl,-Bsymbolic"] if platform.system() == "Linux" else [])


def version() -> str:
    m = re.search(r'^version\s*=\s*"([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    return m.group(1) if m else "0.0.0-dev"


def make_builder() -> FFI:
    flags = compile_flags()
    sources = sorted(str(p.relative_to(ROOT)) for p in (ENGINE / "src").glob("*.c"))
    # a changed header rebuilds the engine too (build_ext compares only the sources otherwise)
    headers = sorted(str(p.relative_to(ROOT)) for d in ("src", "include") for p in (ENGINE / d).glob("*.h"))
    info = " ".join(flags + [f"cc={os.environ.get('CC', 'cc')}"])
    ffi = FFI()
    ffi.cdef(cdef_source())
    ffi.set_source(
        "colibri._engine",
        '#include "colibri.h"',
        sources=sources,
        include_dirs=[str(ENGINE / "include")],
        depends=headers,
        extra_compile_args=flags,
        extra_link_args=link_flags(),
        libraries=["m"],
        define_macros=[("COLI_VERSION", f'"{version()}"'), ("COLI_BUILD_FLAGS", f'"{info}"')],
    )
    return ffi


ffibuilder = make_builder()

if __name__ == "__main__":
    ffibuilder.compile(tmpdir=str(ROOT / "build" / "cffi"), verbose=True)
